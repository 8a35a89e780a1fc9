#if canImport(Glibc)
import Glibc
#endif
import ParleyJSON
import ParleyKit
import ParleyKitLinux
import ParleyNet

// parley-sdk-bench: messages per second one ParleyKit client sends and receives against a
// running server, and the client's CPU time per message (bench/sdk/bench.py runs it).
//
//   parley-sdk-bench --server URL --sender-token T --receiver-id ID --receiver-token T
//                    [--count 20000] [--storage file|memory] [--dir DIR]
//
// Phase 1 sends from one client while the receiver is offline: first `count / 10` messages one
// after another (each `send` returns once the message is stored, then the next starts), then
// `count` messages pipelined (256 sends under way, so the outbox stores them in batches).
// Phase 2 connects the receiver, which processes every queued message (replay, dedupe, acks,
// cursor). Each phase reports wall time and this process's user+system CPU (getrusage).

func option(_ name: String) -> String? {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

/// Counts what a client is told and resumes a waiter at a target.
actor Counter: ParleyClientDelegate {
    private(set) var sent = 0
    private(set) var failed = 0
    private(set) var received = 0
    private var waiter: (target: Int, sent: Bool, continuation: CheckedContinuation<Void, Never>)?

    nonisolated func parleyClient(_ client: ParleyClient, didSend clientMessageId: String, result: Result<SentMessage, ParleyError>) async {
        await record(sent: true, ok: (try? result.get()) != nil)
    }

    nonisolated func parleyClient(_ client: ParleyClient, didReceive message: ChatMessage) async {
        await record(sent: false, ok: true)
    }

    private func record(sent isSend: Bool, ok: Bool) {
        if isSend { sent += 1; if !ok { failed += 1 } } else { received += 1 }
        if let waiter, (waiter.sent ? sent : received) >= waiter.target {
            self.waiter = nil
            waiter.continuation.resume()
        }
    }

    func wait(for target: Int, sent isSend: Bool) async {
        if (isSend ? sent : received) >= target { return }
        await withCheckedContinuation { waiter = (target, isSend, $0) }
    }
}

guard let server = option("--server").flatMap(ParleyServerURL.init), let senderToken = option("--sender-token"),
      let receiverId = option("--receiver-id"), let receiverToken = option("--receiver-token") else {
    print("usage: parley-sdk-bench --server URL --sender-token T --receiver-id ID --receiver-token T [--count N] [--storage file|memory] [--dir DIR]")
    exit(2)
}
let count = Int(option("--count") ?? "") ?? 20_000
let useFiles = (option("--storage") ?? "file") == "file"
let directory = option("--dir") ?? "/tmp/parley-sdk-bench-\(getpid())"
let group = try EventLoopGroup(threads: 1)
let pool = try BlockingPool(threads: 1)

func makeClient(_ device: String) -> ParleyClient {
    let configuration = ParleyClientConfiguration(serverURL: server, deviceId: device, maxOutboxEntries: 2 * count + 1)
    let storage: any ParleyStorage = useFiles
        ? FileStorage(directory: directory + "/" + device, runner: BlockingPoolRunner(pool: pool))
        : InMemoryStorage()
    return ParleyClient(configuration: configuration, transport: LinuxTransport(group: group), storage: storage)
}

// Register the receiver's device, then take it offline so the messages queue for it.
let receiver = makeClient("bench-receiver")
let receiverCounter = Counter()
await receiver.setDelegate(receiverCounter)
try await receiver.connect(sessionToken: receiverToken)
try await receiver.waitUntilConnected()
await receiver.disconnect()

let sender = makeClient("bench-sender")
let senderCounter = Counter()
await sender.setDelegate(senderCounter)
try await sender.connect(sessionToken: senderToken)
try await sender.waitUntilConnected()

let text = String(repeating: "x", count: 100)
let clock = ContinuousClock()
let sequentialCount = max(1, count / 10)
var cpu = cpuSeconds()
var start = clock.now
for _ in 0..<sequentialCount {
    try await sender.send(OutgoingMessage(to: [receiverId], text: text))
}
await senderCounter.wait(for: sequentialCount, sent: true)
let sequentialWall = seconds(clock.now - start)
let sequentialCPU = cpuSeconds() - cpu

cpu = cpuSeconds()
start = clock.now
try await withThrowingTaskGroup(of: Void.self) { group in
    for index in 0..<count {
        if index >= 256 { try await group.next() }
        group.addTask { try await sender.send(OutgoingMessage(to: [receiverId], text: text)) }
    }
    try await group.waitForAll()
}
await senderCounter.wait(for: sequentialCount + count, sent: true)
let sendWall = seconds(clock.now - start)
let sendCPU = cpuSeconds() - cpu
let failedSends = await senderCounter.failed

cpu = cpuSeconds()
start = clock.now
try await receiver.connect(sessionToken: receiverToken)
await receiverCounter.wait(for: sequentialCount + count, sent: false)
let receiveWall = seconds(clock.now - start)
let receiveCPU = cpuSeconds() - cpu

func row(_ name: String, _ count: Int, _ wall: Double, _ cpu: Double) -> String {
    let rate = Double(count) / wall
    let perMessage = cpu / Double(count) * 1e6
    return "\(name): \(count) messages in \(String(Int(wall * 1000))) ms = \(String(Int(rate))) msg/s, client CPU \(String(Int(perMessage))) µs/msg"
}
print("storage: \(useFiles ? "file (fsync per batch)" : "memory")")
print(row("send one by one", sequentialCount, sequentialWall, sequentialCPU))
print(row("send pipelined", count, sendWall, sendCPU) + (failedSends > 0 ? " (\(failedSends) failed)" : ""))
print(row("receive", sequentialCount + count, receiveWall, receiveCPU))
await sender.shutdown()
await receiver.shutdown()
exit(failedSends == 0 ? 0 : 1)
