"""The real `openai` client against a quest server (the your-server lesson's).

Usage: python openai_client.py PORT

Streams one chat completion and asks the same one whole, sends requests the server must
refuse (each must raise openai.BadRequestError: status 400 and OpenAI's error body), then
one more good request. Prints one JSON object of what it saw.
"""

import json
import sys

import openai

port = int(sys.argv[1])
client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
question = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]

stream = client.chat.completions.create(
    model="quest", messages=question, max_tokens=12, stream=True
)
pieces, finish = [], None
for chunk in stream:
    choice = chunk.choices[0]
    if choice.delta.content:
        pieces.append(choice.delta.content)
    if choice.finish_reason:
        finish = choice.finish_reason

whole = client.chat.completions.create(model="quest", messages=question, max_tokens=12)

refused = []
for what, kwargs in [
    ("no messages", {"messages": []}),
    ("max_tokens 0", {"messages": question, "max_tokens": 0}),
    ("a role the API has not", {"messages": [{"role": "robot", "content": "Hi"}]}),
]:
    try:
        client.chat.completions.create(model="quest", **kwargs)
        refused.append({"what": what, "status": None})
    except openai.BadRequestError as e:
        body = e.body if isinstance(e.body, dict) else {}
        body = body.get("error", body) if isinstance(body.get("error"), dict) else body
        refused.append({"what": what, "status": e.status_code, "param": body.get("param"),
                        "type": body.get("type")})

after = client.chat.completions.create(
    model="quest", messages=[{"role": "user", "content": "Say hi."}], max_tokens=4
)

print(json.dumps({
    "streamed": "".join(pieces),
    "finish": finish,
    "whole": whole.choices[0].message.content,
    "whole_finish": whole.choices[0].finish_reason,
    "refused": refused,
    "after": after.choices[0].message.content,
    "openai": openai.__version__,
}))
