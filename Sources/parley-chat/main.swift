#if canImport(Glibc)
import Glibc
#endif
import ParleyKit
import ParleyKitLinux
import ParleyNet

// parley-chat: a terminal client of Parley built on ParleyKit (docs/sdk-swift.md).
//
//   parley-chat [--server http://127.0.0.1:8080] [--app-id parley] [--data-dir DIR] [--device ID] [--tls-ca-file CA.pem]
//
// An https server is reached over TLS (REST and wss), verified against --tls-ca-file or the system store.
// Reads commands and messages from standard input, one per line; /help lists the commands.

func option(_ name: String, _ arguments: [String]) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

let arguments = CommandLine.arguments
if arguments.contains("--help") || arguments.contains("-h") {
    print("usage: parley-chat [--server http[s]://host[:port]] [--app-id parley] [--data-dir DIR] [--device ID] [--tls-ca-file CA.pem]")
    print("  --server       default http://127.0.0.1:8080; https uses TLS (REST and wss), certificate and host name verified")
    print("  --tls-ca-file  PEM CA bundle an https server is verified against (default: the system store)")
    print(ChatApp.help)
    exit(0)
}
guard let server = ParleyServerURL(option("--server", arguments) ?? "http://127.0.0.1:8080") else {
    print("parley-chat: --server must be http://host[:port] or https://host[:port]")
    exit(2)
}
let home = getenv("HOME").map { String(cString: $0) } ?? "/tmp"
let dataDirectory = option("--data-dir", arguments) ?? home + "/.parley-chat"

let group = try EventLoopGroup(threads: 1)
let pool = try BlockingPool(threads: 2)
let deviceId: String
if let given = option("--device", arguments) {
    deviceId = given
} else {
    deviceId = try await FileStorage.persistentDeviceId(in: dataDirectory, runner: BlockingPoolRunner(pool: pool))
}
let app = ChatApp(server: server, dataDirectory: dataDirectory, appId: option("--app-id", arguments) ?? "parley",
                  group: group, pool: pool, deviceId: deviceId, tlsCAFile: option("--tls-ca-file", arguments))
print("parley-chat on \(server) as device \(deviceId); /help for commands")
while true {
    // Standard input blocks: read it on the blocking pool, never on a loop or a task thread.
    let line = try? await pool.run { readLine(strippingNewline: true) }
    guard let line = line ?? nil else { break }
    if !(await app.handle(line)) { break }
}
exit(0)
