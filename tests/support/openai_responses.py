"""The Responses API of a running hermesd, driven by the official openai client.

    python openai_responses.py BASE_URL API_KEY

Exits non-zero with the failing assertion. Run by tests/responses.rs in a venv it makes, with
the client version it pins.
"""
import sys

import openai
from openai import OpenAI

base, key = sys.argv[1], sys.argv[2]
client = OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)

# A conversation of three turns, each continuing the previous response.
first = client.responses.create(model="hermes-agent", input="my name is Ada", instructions="Be brief.")
assert first.status == "completed", first
assert first.output_text == "echo: my name is Ada", first.output_text
assert first.id.startswith("resp_"), first.id
second = client.responses.create(model="hermes-agent", input="what is my name?", previous_response_id=first.id)
assert second.output_text == "echo: what is my name?", second.output_text
assert second.previous_response_id == first.id
assert second.usage.total_tokens >= second.usage.input_tokens

# Retrieved as it was given.
again = client.responses.retrieve(second.id)
assert again.id == second.id and again.output_text == second.output_text, again

# Streamed: the events in order, the text in deltas, the whole response at the end.
kinds, deltas = [], []
with client.responses.stream(model="hermes-agent", input="stream this", previous_response_id=second.id) as stream:
    for event in stream:
        kinds.append(event.type)
        if event.type == "response.output_text.delta":
            deltas.append(event.delta)
    final = stream.get_final_response()
assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
assert "response.output_text.done" in kinds and "response.output_item.done" in kinds, kinds
assert "".join(deltas) == "echo: stream this" == final.output_text, (deltas, final.output_text)

# Deleted: gone for good.
client.responses.delete(first.id)
try:
    client.responses.retrieve(first.id)
    raise AssertionError("a deleted response was retrieved")
except openai.NotFoundError:
    pass

# A wrong key is refused.
try:
    OpenAI(base_url=f"{base}/v1", api_key="wrong", max_retries=0).responses.create(model="hermes-agent", input="hi")
    raise AssertionError("a wrong key was accepted")
except openai.AuthenticationError:
    pass

print("ok")
