#!/usr/bin/env python3
"""A minimal, fast beforeMessage webhook for bench/realtime/run.py --hook: HTTP/1.1 keep-alive on
asyncio, answers every POST with {"success":true} (the message goes through unchanged) and
counts the calls it answered (printed on SIGTERM).

Usage: bench/realtime/webhook.py PORT_FILE   (binds 127.0.0.1:0 and writes the port there)
"""
import asyncio
import signal
import sys

ANSWER = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{"success":true}'
MAX_HEAD = 16384
MAX_BODY = 1 << 20
answered = 0


async def serve(reader, writer):
    global answered
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            if len(head) > MAX_HEAD:
                break
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            if length > MAX_BODY:
                break
            await reader.readexactly(length)
            writer.write(ANSWER)
            answered += 1
            await writer.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
        pass
    writer.close()


async def main(port_file):
    server = await asyncio.start_server(serve, "127.0.0.1", 0, limit=MAX_HEAD)
    with open(port_file, "w") as f:
        f.write(str(server.sockets[0].getsockname()[1]))
    stop = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set_result, None)
    await stop
    print(answered, flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
