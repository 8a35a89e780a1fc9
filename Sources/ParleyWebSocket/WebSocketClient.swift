import ParleyHTTP
import ParleyNet

/// Opens client WebSockets on an event loop: TCP connect, the upgrade handshake, then a
/// `WebSocketHandler` in the client role (masked frames) driving `delegate`.
public enum WebSocketClient {
    /// Why a connection did not open.
    public enum ConnectError: Error, Sendable, CustomStringConvertible {
        /// The TCP connect failed or timed out.
        case connect(NetError)
        /// The server's answer to the upgrade was not a valid HTTP response.
        case badResponse(HTTPResponseParserError)
        /// The server refused the upgrade or answered it wrongly.
        case handshake(WebSocketClientHandshakeError)
        /// The connection closed, or the deadline passed, before the handshake finished.
        case closedDuringHandshake
        /// The TLS handshake failed (`wss`): the certificate did not verify or the server spoke
        /// no TLS; the upgrade request was never sent in clear.
        case tls(TLSError)

        public var description: String {
            switch self {
            case .connect(let error): "connect failed: \(error)"
            case .badResponse(let error): "bad upgrade response: \(error)"
            case .handshake(let error): "\(error)"
            case .closedDuringHandshake: "the connection closed during the WebSocket handshake"
            case .tls(let error): "\(error)"
            }
        }
    }

    /// Connects to `address` and upgrades `target` (loop thread only). `completion` runs once on
    /// the loop: with the open handler (already delivering to `delegate`) or the error. The
    /// whole exchange, connect included, must finish within `timeout`. With `tls` (`wss`) the
    /// connection is encrypted first, verifying the server's chain and `serverName` (sent as SNI).
    public static func connect(
        to address: SocketAddress, authority: String, target: String, extraHeaders: [(String, String)] = [],
        tls: (context: TLSContext, serverName: String)? = nil,
        on loop: EventLoop, timeout: Duration, configuration: WebSocketHandler.Configuration,
        delegate: any WebSocketDelegate, completion: @escaping (Result<WebSocketHandler, ConnectError>) -> Void
    ) {
        loop.preconditionInEventLoop()
        let handshake = WebSocketClientHandshake(authority: authority, target: target, extraHeaders: extraHeaders)
        TCPClient.connect(to: address, on: loop, timeout: timeout) { result in
            switch result {
            case .failure(let error):
                completion(.failure(.connect(error)))
            case .success(let connection):
                let upgrade = UpgradeHandler(handshake: handshake, configuration: configuration, delegate: delegate, completion: completion)
                connection.handler = upgrade
                upgrade.timer = loop.schedule(after: timeout) { [weak upgrade, weak connection] in
                    upgrade?.finish(.failure(.closedDuringHandshake))
                    connection?.close(immediately: true)
                }
                if let tls {
                    let session: TLSConnection
                    do throws(TLSError) {
                        session = try TLSConnection(context: tls.context, serverName: tls.serverName)
                    } catch {
                        upgrade.finish(.failure(.tls(error)))
                        connection.close(immediately: true)
                        return
                    }
                    // The upgrade deadline above covers the handshake; this one only backs it up.
                    connection.startTLS(session, handshakeTimeout: timeout + .seconds(1)) { [weak upgrade] result in
                        if case .failure(let error) = result, error != .closed { upgrade?.finish(.failure(.tls(error))) }
                    }
                }
                connection.write(handshake.requestBytes)
            }
        }
    }

    /// Reads the upgrade response, then hands the connection to a client `WebSocketHandler`.
    private final class UpgradeHandler: ConnectionHandler {
        let handshake: WebSocketClientHandshake
        let configuration: WebSocketHandler.Configuration
        var delegate: (any WebSocketDelegate)?
        var completion: ((Result<WebSocketHandler, ConnectError>) -> Void)?
        var parser = HTTPResponseParser(limits: .init(maxHeadBytes: 16 * 1024, maxHeaderCount: 64, maxBodyBytes: 0))
        var timer: TimerID?

        init(handshake: WebSocketClientHandshake, configuration: WebSocketHandler.Configuration, delegate: any WebSocketDelegate,
             completion: @escaping (Result<WebSocketHandler, ConnectError>) -> Void) {
            self.handshake = handshake
            self.configuration = configuration
            self.delegate = delegate
            self.completion = completion
            parser.startResponse(to: .get)
        }

        func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {
            parser.append(bytes)
            let head: HTTPResponseHead
            do {
                guard case .head(let parsed)? = try parser.next() else { return }
                head = parsed
                try handshake.validate(status: head.status.code) { head.headers[$0] }
            } catch let error as HTTPResponseParserError {
                fail(connection, .badResponse(error))
                return
            } catch let error as WebSocketClientHandshakeError {
                fail(connection, .handshake(error))
                return
            } catch {
                fail(connection, .closedDuringHandshake)
                return
            }
            guard let delegate else { return }
            self.delegate = nil
            let rest = parser.takeBufferedBytes()
            let handler = WebSocketHandler.install(on: connection, configuration: configuration, delegate: delegate,
                                                   initialBytes: [], role: .client)
            finish(.success(handler))
            if !rest.isEmpty && !connection.isClosed {
                rest.withUnsafeBytes { handler.connection(connection, didRead: $0) }
            }
        }

        func connectionDidClose(_ connection: Connection) {
            finish(.failure(.closedDuringHandshake))
        }

        private func fail(_ connection: Connection, _ error: ConnectError) {
            finish(.failure(error))
            connection.close(immediately: true)
        }

        func finish(_ result: Result<WebSocketHandler, ConnectError>) {
            guard let completion else { return }
            self.completion = nil
            delegate = nil
            if let timer, let loop = EventLoop.current { loop.cancel(timer) }
            timer = nil
            completion(result)
        }
    }
}
