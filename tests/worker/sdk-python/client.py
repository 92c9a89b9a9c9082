"""One call through the official Python LLM SDKs (openai, anthropic), for
tests/worker/sdks.test.mjs: the call's spec is argv[1] (JSON: sdk, root,
headers, stream, model, prompt, max_tokens); prints one JSON line, the
answer ({"text", "usage", "total"}) or the error the SDK raised ({"error":
{"class", "status", "body", "message", "should_retry"}}). Retries are the
SDK's defaults, as a user leaves them."""

import json
import sys


def openai_chat(spec):
    import openai

    client = openai.OpenAI(api_key="sk-test", base_url=spec["root"] + "/v1", default_headers=spec["headers"])
    body = dict(model=spec["model"], messages=[{"role": "user", "content": spec["prompt"]}], max_completion_tokens=spec["max_tokens"])
    if not spec["stream"]:
        c = client.chat.completions.create(**body)
        return c.choices[0].message.content, c.usage.model_dump(exclude_none=True), c.usage.total_tokens
    text, usage = "", None
    for chunk in client.chat.completions.create(**body, stream=True, stream_options={"include_usage": True}):
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
        if chunk.usage:
            usage = chunk.usage
    return text, usage and usage.model_dump(exclude_none=True), usage and usage.total_tokens


def anthropic_messages(spec):
    import anthropic

    client = anthropic.Anthropic(api_key="sk-ant-test", base_url=spec["root"], default_headers=spec["headers"])
    body = dict(model=spec["model"], max_tokens=spec["max_tokens"], messages=[{"role": "user", "content": spec["prompt"]}])
    if not spec["stream"]:
        m = client.messages.create(**body)
    else:
        with client.messages.stream(**body) as s:
            for _ in s.text_stream:
                pass
            m = s.get_final_message()
    text = "".join(block.text for block in m.content if block.type == "text")
    u = m.usage
    total = u.input_tokens + (u.cache_creation_input_tokens or 0) + (u.cache_read_input_tokens or 0) + u.output_tokens
    return text, u.model_dump(exclude_none=True), total


SDKS = {"openai": openai_chat, "anthropic": anthropic_messages}


def main():
    spec = json.loads(sys.argv[1])
    try:
        text, usage, total = SDKS[spec["sdk"]](spec)
        print(json.dumps({"text": text, "usage": usage, "total": total}))
    except Exception as e:  # the SDK's error, whatever it is, is the result
        response = getattr(e, "response", None)
        headers = getattr(response, "headers", None) or {}
        print(
            json.dumps(
                {
                    "error": {
                        "class": type(e).__name__,
                        "status": getattr(e, "status_code", None),
                        "body": getattr(e, "body", None),
                        "message": str(e),
                        "should_retry": headers.get("x-should-retry"),
                    }
                }
            )
        )


if __name__ == "__main__":
    main()
