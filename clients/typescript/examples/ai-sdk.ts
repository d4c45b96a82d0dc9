import { generateText, stepCountIs, tool, type LanguageModel, type ModelMessage } from "ai";
import { z } from "zod";
import { Assent } from "@assent/client";
import { AssentApprovals } from "@assent/client/ai-sdk";

const assent = new Assent(process.env.ASSENT_URL!, process.env.ASSENT_TOKEN!);
const approvals = new AssentApprovals(assent); // one per application

const tools = approvals.tools({
  refund: tool({
    description: "Refund part of an order",
    inputSchema: z.object({ order: z.string(), cents: z.number().int() }),
    execute: async ({ order, cents }) => `refunded ${cents} cents on ${order}`,
  }),
});

/** One turn of a conversation: the calls the rules allow run at once, the others wait
 * for a person in Assent, then the run continues with the decisions. */
export async function chat(model: LanguageModel, prompt: string): Promise<string> {
  const messages: ModelMessage[] = [{ role: "user", content: prompt }];
  for (;;) {
    const result = await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
    messages.push(...result.response.messages);
    const responses = await approvals.responses(result.content); // awaits the person
    if (responses.length === 0) {
      return result.text;
    }
    messages.push({ role: "tool", content: responses });
  }
}
