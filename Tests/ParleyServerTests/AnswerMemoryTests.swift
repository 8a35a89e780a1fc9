import Foundation
import ParleyPostgres
import ParleyTestSupport
import XCTest

/// The memory a real `parley serve` process takes for large answers read slowly: peak resident
/// memory (`VmHWM` in /proc/<pid>/status) before and after, with other requests answered
/// meanwhile (docs/rest-api.md, "Answer sizes").
final class AnswerMemoryTests: XCTestCase {
    /// `VmHWM` and `VmRSS` of `pid`, in bytes; fails the test when /proc cannot be read.
    static func memory(of pid: Int32) throws -> (peak: Int, resident: Int) {
        let text = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        func field(_ name: String) -> Int? {
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return nil }
            return line.split(separator: " ").compactMap { Int($0) }.first.map { $0 * 1024 }
        }
        guard let peak = field("VmHWM"), let resident = field("VmRSS") else {
            throw ProcStatusUnreadable(pid: pid)
        }
        return (peak, resident)
    }

    /// Reads one response's bytes from `client` in `step`-byte reads with `pause` between them,
    /// until `total` bytes (head included) arrived or the server closed; returns what arrived.
    static func readSlowly(_ client: TestHTTPClient, until marker: [UInt8]?, step: Int, pause: TimeInterval, limit: Int) -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: step)
        while received.count < limit {
            let n = recv(client.fd, &buffer, step, 0)
            guard n > 0 else { break }
            received += buffer[..<n]
            if let marker, received.count >= marker.count, Array(received.suffix(marker.count)) == marker { break }
            Thread.sleep(forTimeInterval: pause)
        }
        return received
    }

    private static let parse = "X-Parse-Application-Id: parley\r\n"

    /// The highest `VmRSS` of `pid` seen every 20 ms until `done` is signalled (the process's
    /// `VmHWM` includes its start-up, which can hide what the test does).
    final class ResidentSampler: @unchecked Sendable {
        private let lock = NSLock()
        private var highest = 0
        private var running = true
        private var failure: (any Error)?
        private let finished = DispatchSemaphore(value: 0)

        init(pid: Int32) {
            Thread.detachNewThread { [self] in
                while lock.withLock({ running }) {
                    do {
                        let resident = try AnswerMemoryTests.memory(of: pid).resident
                        lock.withLock { highest = max(highest, resident) }
                    } catch {
                        lock.withLock { failure = error }
                        break
                    }
                    Thread.sleep(forTimeInterval: 0.02)
                }
                finished.signal()
            }
        }

        /// Stops sampling; the highest resident size seen (throws when /proc could not be read).
        func stop() throws -> Int {
            lock.withLock { running = false }
            finished.wait()
            if let failure { throw failure }
            return lock.withLock { highest }
        }
    }

    /// One, then four clients reading 20 MB finds (1000 objects of 20 KB) at about 6 MB/s each:
    /// the answers stream from cursors, so the server's resident memory grows by a few pages
    /// for one reader and by less than one answer per reader for four (buffered, each would
    /// hold its rows and its JSON: about 40 MB); a small find is answered quickly meanwhile,
    /// and every cursor is closed at the end.
    func testSlowReadersOfLargeFindsKeepMemoryBounded() throws {
        let server = try ParleyServerProcess(arguments: ["--allow-client-class-creation"])
        let db = try PostgresBlockingConnection(connectionString: server.databaseURL)
        _ = try db.query("""
            INSERT INTO objects (class_name, object_id, acl, data)
            SELECT 'Log', 'o' || lpad(i::text, 6, '0'), '{"*":{"read":true}}', jsonb_build_object('n', i, 'blob', repeat(md5(i::text), 625))
            FROM generate_series(1, 1000) AS i
            """)
        let small = try TestHTTPClient(port: server.port)
        let request = "GET /parse/classes/Log?limit=1000&order=n HTTP/1.1\r\nHost: x\r\n\(Self.parse)\r\n"
        // Warm up: one answer read at full speed, and the small find.
        let warm = try TestHTTPClient(port: server.port, timeoutSeconds: 30)
        try warm.send(request)
        let whole = try warm.readResponse()
        XCTAssertEqual(whole.status, 200)
        XCTAssertEqual(((whole.json as? [String: Any])?["results"] as? [Any])?.count, 1000)
        let answerBytes = whole.body.count
        XCTAssertGreaterThan(answerBytes, 20_000_000)
        XCTAssertEqual(try small.request("GET", "/parse/classes/Log?limit=2&keys=n", headers: [("X-Parse-Application-Id", "parley")]).status, 200)
        /// Grows resident memory by how much, with the slowest small find meanwhile.
        func measure(readers: Int) throws -> (grown: Int, slowest: TimeInterval) {
            let before = try Self.memory(of: server.process.processIdentifier)
            let sampler = ResidentSampler(pid: server.process.processIdentifier)
            let done = DispatchGroup()
            let lengths = LockedArray()
            for _ in 0..<readers {
                done.enter()
                Thread.detachNewThread {
                    defer { done.leave() }
                    guard let client = try? TestHTTPClient(port: server.port, timeoutSeconds: 30), (try? client.send(request)) != nil else { return }
                    let bytes = Self.readSlowly(client, until: Array("0\r\n\r\n".utf8), step: 64 << 10, pause: 0.01, limit: answerBytes * 2)
                    lengths.append(bytes.count)
                }
            }
            var slowest: TimeInterval = 0
            while done.wait(timeout: .now() + .milliseconds(200)) == .timedOut {
                let started = Date()
                let reply = try small.request("GET", "/parse/classes/Log?limit=2&keys=n", headers: [("X-Parse-Application-Id", "parley")])
                XCTAssertEqual(reply.status, 200)
                slowest = max(slowest, Date().timeIntervalSince(started))
            }
            let highest = try sampler.stop()
            let grown = highest - before.resident
            print("AnswerMemoryTests: \(readers) slow readers of \(answerBytes) bytes: VmRSS \(before.resident >> 20) → at most \(highest >> 20) MiB (+\(grown >> 20)), slowest small find \(Int(slowest * 1000)) ms")
            XCTAssertEqual(lengths.values.count, readers)
            for length in lengths.values { XCTAssertGreaterThan(length, answerBytes, "each reader got the whole answer") }
            XCTAssertLessThan(slowest, 1, "a small find waited \(slowest) s behind the streams")
            return (grown, slowest)
        }
        let one = try measure(readers: 1)
        XCTAssertLessThan(one.grown, 8 << 20, "peak memory grew by \(one.grown >> 20) MiB for one streamed answer of \(answerBytes >> 20) MB")
        // Buffered, each answer would hold its rows and its JSON (twice its size) at once.
        // Several streams at once leave more in the allocator's per-thread arenas
        // (docs/rest-api.md, "Answer sizes"), still less than one answer per reader.
        let four = try measure(readers: 4)
        XCTAssertLessThan(four.grown, 4 * answerBytes, "peak memory grew by \(four.grown >> 20) MiB for 4 streamed answers of \(answerBytes >> 20) MB")
        let metrics = try small.request("GET", "/metrics").text
        XCTAssertTrue(metrics.contains("parley_postgres_cursors_open 0"), metrics)
    }

    /// Sixteen clients fetching a 3 MB object each and reading it slowly: each answer holds its
    /// row and its JSON until it is sent, and no more (the body goes out in slices).
    func testConcurrentLargeObjectGetsKeepMemoryBounded() throws {
        let server = try ParleyServerProcess(arguments: ["--allow-client-class-creation"])
        let db = try PostgresBlockingConnection(connectionString: server.databaseURL)
        _ = try db.query("""
            INSERT INTO objects (class_name, object_id, acl, data)
            SELECT 'Blob', 'b' || i, '{"*":{"read":true}}', jsonb_build_object('n', i, 'blob', repeat(md5(i::text), 100000))
            FROM generate_series(1, 16) AS i
            """)
        let warm = try TestHTTPClient(port: server.port, timeoutSeconds: 30)
        let first = try warm.request("GET", "/parse/classes/Blob/b1", headers: [("X-Parse-Application-Id", "parley")])
        XCTAssertEqual(first.status, 200)
        let objectBytes = first.body.count
        XCTAssertGreaterThan(objectBytes, 3_000_000)
        let before = try Self.memory(of: server.process.processIdentifier)
        let sampler = ResidentSampler(pid: server.process.processIdentifier)
        let clients = 16
        let done = DispatchGroup()
        let lengths = LockedArray()
        for index in 1...clients {
            done.enter()
            Thread.detachNewThread {
                defer { done.leave() }
                guard let client = try? TestHTTPClient(port: server.port, timeoutSeconds: 30),
                      (try? client.send("GET /parse/classes/Blob/b\(index) HTTP/1.1\r\nHost: x\r\n\(Self.parse)\r\n")) != nil else { return }
                let bytes = Self.readSlowly(client, until: nil, step: 64 << 10, pause: 0.02, limit: objectBytes)
                lengths.append(bytes.count)
            }
        }
        done.wait()
        let highest = try sampler.stop()
        let after = try Self.memory(of: server.process.processIdentifier)
        let grown = highest - before.resident
        print("AnswerMemoryTests: \(clients) slow GETs of \(objectBytes) bytes: VmRSS \(before.resident >> 20) → at most \(highest >> 20) MiB (+\(grown >> 20)), VmHWM \(before.peak >> 20) → \(after.peak >> 20) MiB")
        XCTAssertEqual(lengths.values.count, clients)
        for length in lengths.values { XCTAssertGreaterThanOrEqual(length, objectBytes) }
        XCTAssertLessThan(grown, clients * objectBytes * 3, "peak memory grew by \(grown >> 20) MiB for \(clients) answers of \(objectBytes >> 20) MB")
    }
}

/// /proc/<pid>/status without the memory fields: the measurement cannot be made.
struct ProcStatusUnreadable: Error {
    let pid: Int32
}

/// Appended to from reader threads.
final class LockedArray: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: [Int] = []

    func append(_ value: Int) {
        lock.lock()
        storage.append(value)
        lock.unlock()
    }

    var values: [Int] {
        lock.lock()
        defer { lock.unlock() }
        return storage
    }
}
