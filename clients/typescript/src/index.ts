// The Assent client for TypeScript: calls an application runs itself, decided in Assent
// (at once by a rule, or by a person from any door) and reported back. The AI SDK adapter
// is `@assent/client/ai-sdk`.

export {
  Assent,
  AssentError,
  Denied,
  type AssentOptions,
  type Decision,
  type DecisionJson,
  type DecisionStatus,
  type ProposeOptions,
  type Recorded,
  type RunReport,
  type WaitOptions,
} from "./client.js";
