@testable import ParleyHTTP

/// A request head reduced to comparable values.
struct HeadSummary: Equatable, CustomStringConvertible {
    var method: HTTPMethod
    var target: String
    var path: String
    var query: String?
    var version: HTTPVersion
    var headers: [String]
    var keepAlive: Bool
    var expectContinue: Bool
    var isUpgrade: Bool
    var framing: HTTPBodyFraming

    init(_ head: HTTPRequestHead) {
        method = head.method
        target = head.target
        path = head.path
        query = head.query
        version = head.version
        headers = head.headers.map { "\($0.name): \($0.value)" }
        keepAlive = head.keepAlive
        expectContinue = head.expectContinue
        isUpgrade = head.isUpgrade
        framing = head.bodyFraming
    }

    var description: String { "\(method) \(target) \(version) \(headers) keepAlive=\(keepAlive)" }
}

/// Parser output with consecutive body events merged, so different splits compare equal.
enum RecordedEvent: Equatable, CustomStringConvertible {
    case head(HeadSummary)
    case body([UInt8])
    case end
    case upgraded(leftover: [UInt8])
    case error(HTTPParserError)

    var description: String {
        switch self {
        case .head(let head): "head(\(head))"
        case .body(let bytes): "body(\(String(decoding: bytes, as: UTF8.self).debugDescription))"
        case .end: "end"
        case .upgraded(let leftover): "upgraded(\(leftover.count) bytes left)"
        case .error(let error): "error(\(error))"
        }
    }
}

enum ParserDriver {
    /// Feeds `bytes` in the given chunks and records every event until the input ends, an error
    /// is thrown or an upgrade stops the parser.
    static func run(_ bytes: [UInt8], chunkEnds: [Int], limits: HTTPParserLimits = HTTPParserLimits()) -> [RecordedEvent] {
        var parser = HTTPRequestParser(limits: limits)
        var events: [RecordedEvent] = []
        func record(_ event: RecordedEvent) {
            if case .body(let more) = event, case .body(let previous)? = events.last {
                events[events.count - 1] = .body(previous + more)
            } else {
                events.append(event)
            }
        }
        var start = 0
        for end in chunkEnds + [bytes.count] where end > start || end == bytes.count {
            let chunk = Array(bytes[start..<end])
            var offset = 0
            while true {
                let result: (event: HTTPParserEvent?, consumed: Int)
                do {
                    result = try chunk.withUnsafeBytes { raw in
                        try parser.nextEvent(in: UnsafeRawBufferPointer(rebasing: raw[offset...]))
                    }
                } catch {
                    record(.error(error as! HTTPParserError))
                    return events
                }
                precondition(result.consumed >= 0 && offset + result.consumed <= chunk.count, "consumed out of range")
                offset += result.consumed
                guard let event = result.event else {
                    if parser.isUpgraded {
                        record(.upgraded(leftover: Array(chunk[offset...]) + Array(bytes[end...])))
                        return events
                    }
                    precondition(offset == chunk.count, "nil event before the input was used up")
                    break
                }
                switch event {
                case .head(let head): record(.head(HeadSummary(head)))
                case .body(let body): record(.body(Array(body)))
                case .end: record(.end)
                }
            }
            start = end
            if end == bytes.count { break }
        }
        return events
    }

    static func whole(_ bytes: [UInt8], limits: HTTPParserLimits = HTTPParserLimits()) -> [RecordedEvent] {
        run(bytes, chunkEnds: [], limits: limits)
    }

    static func byteByByte(_ bytes: [UInt8], limits: HTTPParserLimits = HTTPParserLimits()) -> [RecordedEvent] {
        run(bytes, chunkEnds: Array(stride(from: 1, to: bytes.count, by: 1)), limits: limits)
    }
}

extension Array where Element == UInt8 {
    init(http text: String) {
        self = Array(text.utf8)
    }
}
