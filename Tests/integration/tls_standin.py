"""An HTTPS server standing in for a TLS peer of Parley's client (Python's ssl module).

Run as a script: `tls_standin.py CERT KEY` serves HTTPS on 127.0.0.1 with that certificate
chain and key, prints `PORT <port>` first, answers every GET with 200 and `ok <path>`, and
serves until its stdin closes. `GET /tls` answers `alpn=<protocol> sni=<name>`: what the client
offered (ALPN `http/1.1` is accepted) and the name it sent, `None` for none.
"""
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/tls":
            body = f"alpn={self.request.selected_alpn_protocol()} sni={getattr(self.request, 'parley_sni', None)}".encode()
        else:
            body = f"ok {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[1], sys.argv[2])
    context.set_alpn_protocols(["http/1.1"])
    context.sni_callback = lambda connection, name, _: setattr(connection, "parley_sni", name)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print(f"PORT {server.server_address[1]}", flush=True)
    threading.Thread(target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
