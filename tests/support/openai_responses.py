"""The Responses API of a running hermesd, driven by the official openai client.

    python openai_responses.py BASE_URL API_KEY [functions]

With `functions`, a client function called, answered and called again while streaming (the
fake model is scripted for it); without, a conversation, retrieval, streaming and deletion.

Exits non-zero with the failing assertion. Run by tests/responses.rs in a venv it makes, with
the client version it pins.
"""
import json
import sys

import openai
from openai import OpenAI

base, key = sys.argv[1], sys.argv[2]
client = OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)

if sys.argv[3:] == ["functions"]:
    tools = [{
        "type": "function", "name": "get_weather", "description": "The weather in a city.", "strict": False,
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }]
    asked = client.responses.create(model="hermes-agent", input="weather in Berlin?", tools=tools)
    calls = [item for item in asked.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather", asked.output
    assert json.loads(calls[0].arguments) == {"city": "Berlin"}, calls[0].arguments
    answered = client.responses.create(
        model="hermes-agent", previous_response_id=asked.id, tools=tools,
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny, 21C"}],
    )
    assert answered.output_text == "It is sunny in Berlin.", answered.output
    with client.responses.stream(
        model="hermes-agent", input="and in Paris?", previous_response_id=answered.id, tools=tools,
    ) as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()
    streamed = [item for item in final.output if item.type == "function_call"]
    assert len(streamed) == 1 and json.loads(streamed[0].arguments) == {"city": "Paris"}, final.output
    print("ok")
    sys.exit(0)

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
