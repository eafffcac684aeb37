"""64 concurrent streaming clients with different prompts and lengths, 16 of them hanging up
midway: every other stream ends with [DONE] and equals its sequential greedy output, and
afterwards /metrics shows no running request and no KV page held."""

import threading
import time

from common import CI, check, client, metrics, run

CLIENTS = 64
HANG_UP_EVERY = 4  # clients 0, 4, 8, ... hang up: 16 of 64
TOPICS = ["rivers", "bread", "the moon", "chess", "volcanoes", "owls", "trains", "music"]


def prompt(i):
    # Different lengths: 1 to 4 sentences of context before the question.
    context = " ".join(f"Note {j}: {TOPICS[(i + j) % 8]} matter to client {i}." for j in range(1 + i % 4))
    return f"{context} Write one sentence about {TOPICS[i % 8]}."


def max_tokens(i):
    return (6 if CI else 12) + i % 7


def args(i):
    return dict(model="ignored-below", messages=[{"role": "user", "content": prompt(i)}], max_tokens=max_tokens(i),
                temperature=0)


def request_args(i, name):
    a = args(i)
    a["model"] = name
    return a


def test_64_streams_with_16_hang_ups():
    c = client()
    name = c.models.list().data[0].id
    completing = [i for i in range(CLIENTS) if i % HANG_UP_EVERY != 0]
    sequential = {}
    for i in completing:
        sequential[i] = c.chat.completions.create(**request_args(i, name)).choices[0].message.content
    outputs, done, errors = {}, {}, []
    start = threading.Barrier(CLIENTS)

    def one(i):
        try:
            start.wait()
            stream = c.chat.completions.create(**request_args(i, name), stream=True)
            text, chunks = "", 0
            for chunk in stream:
                chunks += 1
                if chunk.choices:
                    text += chunk.choices[0].delta.content or ""
                if i % HANG_UP_EVERY == 0 and chunks == 3:
                    stream.close()  # hang up midway
                    return
            outputs[i] = text
            done[i] = True
        except Exception as e:  # noqa: BLE001 - collected and reported below
            errors.append(f"client {i}: {type(e).__name__}: {e}")

    t0 = time.time()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    print(f"  64 concurrent streams in {time.time() - t0:.1f}s")
    check(not errors, "\n".join(errors))
    check(sorted(done) == completing, f"every completing stream ended with [DONE]: {sorted(done)}")
    for i in completing:
        check(outputs[i] == sequential[i], f"client {i}: {outputs[i]!r} != sequential {sequential[i]!r}")
    # The engine cancels a hung-up request at its next step; give it a moment.
    for _ in range(100):
        m = metrics()
        if m["ultra_requests_running"] == 0 and m["ultra_requests_waiting"] == 0 and m["ultra_kv_pages_in_use"] == 0:
            break
        time.sleep(0.1)
    check(m["ultra_requests_running"] == 0, f"0 running, got {m['ultra_requests_running']}")
    check(m["ultra_requests_waiting"] == 0, f"0 waiting, got {m['ultra_requests_waiting']}")
    check(m["ultra_kv_pages_in_use"] == 0, f"0 KV pages held, got {m['ultra_kv_pages_in_use']}")


def test_a_whole_request_whose_client_hangs_up_is_cancelled():
    import json
    import socket
    from urllib.parse import urlparse

    from common import URL
    before = metrics()["ultra_requests_total_cancelled"]
    u = urlparse(URL)
    body = json.dumps({"prompt": "Count: 1, 2, 3,", "max_tokens": 400}).encode()
    s = socket.create_connection((u.hostname, u.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    time.sleep(0.5)
    s.close()  # before the 400 tokens are done
    for _ in range(100):
        m = metrics()
        if m["ultra_requests_total_cancelled"] > before and m["ultra_kv_pages_in_use"] == 0:
            break
        time.sleep(0.1)
    check(m["ultra_requests_total_cancelled"] == before + 1, "cancelled when its client went away")
    check(m["ultra_requests_running"] == 0 and m["ultra_kv_pages_in_use"] == 0, f"nothing held: {m}")


if __name__ == "__main__":
    run([test_64_streams_with_16_hang_ups, test_a_whole_request_whose_client_hangs_up_is_cancelled])
