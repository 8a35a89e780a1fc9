"""A plain-TCP to TLS relay, so a client without TLS (kosoku, the Autobahn suite) can drive a
TLS server: `tls_relay.py TARGET_PORT SERVER_NAME CA_FILE` listens on 127.0.0.1, prints
`PORT <port>` first, and for each connection opens TLS to 127.0.0.1:TARGET_PORT, verifying the
certificate for SERVER_NAME against CA_FILE, then copies bytes both ways until either side
closes. Serves until its stdin closes."""
import asyncio
import ssl
import sys


async def pipe(reader, writer):
    try:
        while True:
            chunk = await reader.read(1 << 16)
            if not chunk:
                break
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        try:
            if writer.can_write_eof():
                writer.write_eof()
            else:
                writer.close()
        except (OSError, RuntimeError):
            writer.close()


async def main():
    target, name, ca = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    context = ssl.create_default_context(cafile=ca)

    async def relay(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target, ssl=context, server_hostname=name)
        except (OSError, ssl.SSLError):
            client_writer.close()
            return
        await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer))
        client_writer.close()
        server_writer.close()

    server = await asyncio.start_server(relay, "127.0.0.1", 0)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    server.close()


if __name__ == "__main__":
    asyncio.run(main())
