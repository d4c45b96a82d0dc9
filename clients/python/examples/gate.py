"""A plain function gated by Assent: each call waits for the decision and runs with
the arguments that were approved (a person's edit included), and the run is recorded."""

import os

from assent import Assent, Denied

assent = Assent(os.environ["ASSENT_URL"], os.environ["ASSENT_TOKEN"])


@assent.gate("refund")
def refund(order: str, cents: int) -> str:
    return f"refunded {cents} cents on {order}"


try:
    print(refund("A-17", 4200))
except Denied as denied:
    print(f"not refunded: {denied.decision.reason}")
