"""`ultra serve --draft-mode lookup --speculate 4` with the `openai` client: greedy output equals
`ultra generate --chat --json` (plain decoding) token for token, drafts are accepted on a
repetitive prompt, stop strings still cut, and no KV page stays held afterwards."""

from common import URL, check, client, generate_json, metrics, run

REPETITIVE = "Repeat this list five times: red, green, blue, red, green, blue, red, green, blue,"


def model_name():
    return client().models.list().data[0].id


def chat(prompt, max_tokens, **kw):
    return client().chat.completions.create(
        model=model_name(), messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=0,
        extra_body={"return_token_ids": True}, **kw,
    )


def test_greedy_chat_equals_plain_generate():
    for prompt in ["What is the capital of France?", REPETITIVE]:
        want = generate_json(prompt, 24)
        r = chat(prompt, 24)
        got = r.model_dump()["choices"][0]["token_ids"]
        check(got == want["tokens"], f"{prompt!r}: {got} != {want['tokens']}")
        check(r.choices[0].message.content == want["text"], f"{r.choices[0].message.content!r} != {want['text']!r}")


def test_drafts_are_accepted_on_a_repetitive_prompt():
    before = metrics()
    client().completions.create(model=model_name(), prompt=REPETITIVE, max_tokens=24, temperature=0)
    after = metrics()
    drafted = after["ultra_spec_draft_tokens_total"] - before["ultra_spec_draft_tokens_total"]
    accepted = after["ultra_spec_accepted_tokens_total"] - before["ultra_spec_accepted_tokens_total"]
    check(drafted > 0 and 0 < accepted <= drafted, f"drafted {drafted}, accepted {accepted}")


def test_stop_string_streamed_with_speculation():
    args = dict(model=model_name(), prompt=REPETITIVE, max_tokens=20, temperature=0)
    full = client().completions.create(**args).choices[0].text
    stop = full[len(full) // 2:len(full) // 2 + 3]
    check(stop.strip() != "", f"a stop string from the middle of {full!r}")
    want = full[:full.find(stop)]
    streamed = "".join(c.choices[0].text for c in client().completions.create(**args, stop=stop, stream=True))
    check(streamed == want, f"streamed {streamed!r} != {want!r} (stop {stop!r})")


def test_no_page_held_afterwards():
    m = metrics()
    check(m["ultra_requests_running"] == 0 and m["ultra_kv_pages_in_use"] == 0, f"running/pages: {m}")


if __name__ == "__main__":
    print("server:", URL)
    run([test_greedy_chat_equals_plain_generate, test_drafts_are_accepted_on_a_repetitive_prompt,
         test_stop_string_streamed_with_speculation, test_no_page_held_afterwards])
