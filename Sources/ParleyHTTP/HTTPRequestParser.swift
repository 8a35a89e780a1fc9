/// What the parser produced from the bytes it was given.
public enum HTTPParserEvent {
    /// A complete request line and header section.
    case head(HTTPRequestHead)
    /// Body bytes (de-chunked); a view into the caller's input, valid until the input is released.
    case body(UnsafeRawBufferPointer)
    /// The request is complete.
    case end
}

/// An incremental, sans-I/O HTTP/1.1 request parser: bytes in, events out.
///
/// Feed it byte chunks of any size with `nextEvent(in:)`; each call returns at most one event
/// and how many input bytes it consumed. The parser is an explicit state machine, one byte at a
/// time for the head and the chunked framing (runs of plain target, name and value bytes are
/// skipped in tight loops), and copies only the head bytes, once: when the head ends, or when an
/// input chunk ends inside it. A request split at any byte boundary produces the same events. It is strict (RFC 9110/9112 and llhttp's
/// strict mode, see docs/http.md): anything ambiguous is an `HTTPParserError`, after which the
/// parser stays failed and the connection must be closed after the error response.
public struct HTTPRequestParser {
    /// Where the parser is between two calls.
    public enum Phase: Sendable, Equatable {
        /// Between requests, nothing buffered.
        case idle
        /// Reading a request line and headers (including empty lines before a request line).
        case head
        /// Reading a body, or the end of a request is due.
        case body
        /// The last request did not keep the connection alive; only CR/LF may follow.
        case closed
        /// An upgrade request ended; the remaining bytes belong to the new protocol.
        case upgraded
        /// A parse error was thrown; every later call throws it again.
        case failed
    }

    enum State: UInt8 {
        case start, startLF
        case method, targetStart, target, version, requestLineCR, requestLineLF
        case headerLineStart, headerName, headerValueStart, headerValue, headerLineLF, headersEndLF
        case fixedBody, messageEnd
        case chunkSize, chunkSizeLF
        case chunkExtensionName, chunkExtensionValueStart, chunkExtensionToken
        case chunkExtensionQuoted, chunkExtensionQuotedEscape, chunkExtensionAfterQuoted
        case chunkData, chunkDataCR, chunkDataLF
        case trailerLineStart, trailerName, trailerValue, trailerLineLF, trailerEndLF
        case closed, upgraded, failed
    }

    /// What the headers of the current request said, reset for every request.
    private struct Message {
        var leadingBytes = 0
        var methodLength = 0
        var method = HTTPMethod.get
        var targetStart = 0
        var targetEnd = 0
        var target = HTTPRequestTarget.none
        var versionIndex = 0
        var versionMinor: UInt8 = 0
        var nameStart = 0
        var nameEnd = 0
        var valueStart = 0
        var valueEnd = 0
        var contentLength: Int?
        var hasTransferEncoding = false
        var chunkedIsFinal = false
        var hasOtherCoding = false
        var connectionClose = false
        var connectionKeepAlive = false
        var connectionUpgrade = false
        var hasUpgrade = false
        var expectContinue = false
        var unsupportedExpectation = false
        var hostCount = 0
        var keepAlive = true
        var isUpgrade = false
        var bodyReceived = 0
        var chunkSizeDigits = 0
        var extensionNameLength = 0
        var extensionBytes = 0
        var trailerBytes = 0
        var trailerCount = 0
        /// The body limit of this request when its reader set one (`limitBody`), else `limits.maxBodyBytes`.
        var bodyLimit: Int?
    }

    public let limits: HTTPParserLimits
    /// Read directly (a stored field) by the server, which keeps the parser in a class: calling a
    /// getter on it there would copy the whole parser.
    private(set) var state = State.start
    private var failure: HTTPParserError?
    private var message = Message()
    /// Bytes left in the fixed-length body or the current chunk.
    private var remaining = 0
    /// The current head's bytes that earlier input chunks held (copied when a chunk ends inside the
    /// head); the rest is still in the current input from `runStart`.
    private var head: [UInt8] = []
    private var fields: [HTTPHeaders.Field] = []
    /// Whether the bytes from `runStart` in the current input belong to the head and are not yet in `head`.
    private(set) var inHead = false
    private var runStart = 0
    /// Whether `consume` completed a head that `takeHead` has not built yet (from `head`, `fields`
    /// and `message`, which stay untouched until then).
    private var headCompleted = false
    private var completedFraming = HTTPBodyFraming.contentLength(0)

    /// What one byte completed.
    private enum Produced {
        case nothing, head, end
    }

    /// What `advance` produced; a head is then taken with `takeHead` (moved, not copied).
    enum Step {
        case needMore
        case head
        case body(UnsafeRawBufferPointer)
        case end
    }

    public init(limits: HTTPParserLimits = HTTPParserLimits()) {
        self.limits = limits
    }

    /// Where the parser is; the server uses it for its header and body deadlines.
    public var phase: Phase { HTTPRequestParser.phase(state: state, inHead: inHead) }

    @inline(__always)
    static func phase(state: State, inHead: Bool) -> Phase {
        switch state {
        case .start: .idle
        case .startLF: .head
        case .closed: .closed
        case .upgraded: .upgraded
        case .failed: .failed
        default: inHead ? .head : .body
        }
    }

    /// Whether an upgrade request has ended: the parser consumes nothing more.
    public var isUpgraded: Bool { state == .upgraded }

    /// Parses from the start of `input` until one event is complete.
    ///
    /// Returns the event (nil when more input is needed) and how many bytes of `input` it used.
    /// When the event is nil every byte was used, except after an upgrade request (see
    /// `isUpgraded`): the unused rest belongs to the new protocol. Call again with the unused
    /// bytes after an event; `.end` may follow `.head` without consuming anything.
    public mutating func nextEvent(in input: UnsafeRawBufferPointer) throws(HTTPParserError) -> (event: HTTPParserEvent?, consumed: Int) {
        let (step, consumed) = try advance(in: input)
        switch step {
        case .needMore: return (nil, consumed)
        case .head: return (.head(takeHead()), consumed)
        case .body(let chunk): return (.body(chunk), consumed)
        case .end: return (.end, consumed)
        }
    }

    /// `nextEvent(in:)` without moving the head through the result: after `.head`, call `takeHead`.
    mutating func advance(in input: UnsafeRawBufferPointer) throws(HTTPParserError) -> (step: Step, consumed: Int) {
        if let failure { throw failure }
        do {
            return try step(input)
        } catch {
            state = .failed
            failure = error
            inHead = false
            throw error
        }
    }

    /// What routing needs of the head `advance` just reported, before `takeHead` or `discardHead`.
    struct CompletedHead {
        let method: HTTPMethod
        let keepAlive: Bool
        let isUpgrade: Bool
        let hasBody: Bool
    }

    /// The head `advance` just reported, without building it (`mutating` only so that a caller
    /// holding the parser in a class property reads it in place instead of copying the parser).
    mutating func completedHead() -> CompletedHead {
        precondition(headCompleted, "HTTPRequestParser: no completed head")
        let hasBody: Bool
        if case .contentLength(0) = completedFraming { hasBody = false } else { hasBody = true }
        return CompletedHead(method: message.method, keepAlive: message.keepAlive, isUpgrade: message.isUpgrade, hasBody: hasBody)
    }

    /// Calls `body` with the raw (not decoded) path bytes of the head `advance` just reported,
    /// in place, before the head is built (see `completedHead` for `mutating`).
    @inline(__always)
    mutating func withCompletedPath<Result>(_ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        precondition(headCompleted, "HTTPRequestParser: no completed head")
        let path = message.target.pathRange
        return head.withUnsafeBufferPointer { body(UnsafeBufferPointer(rebasing: $0[path])) }
    }

    /// Lowers the body limit of the request whose head was just reported (a route's own limit):
    /// a chunk size that would pass it fails with `bodyTooLarge` before its data arrives.
    mutating func limitBody(to limit: Int) {
        message.bodyLimit = min(limit, limits.maxBodyBytes)
    }

    /// Drops the head `advance` just reported without building it; its memory is reused for the next.
    mutating func discardHead() {
        precondition(headCompleted, "HTTPRequestParser: no completed head")
        headCompleted = false
        head.removeAll(keepingCapacity: true)
        fields.removeAll(keepingCapacity: true)
    }

    /// Takes back the memory of a head this parser made, once its request is done with, for the
    /// next head (two allocations and frees fewer per request). Memory still shared with another
    /// value is copied by the reuse instead, which the next head would have allocated anyway; more
    /// than `maxReusedHeadCapacity` bytes are not kept, so an idle connection holds little.
    mutating func reuseHeadMemory(of request: consuming HTTPRequest) {
        guard head.capacity == 0, fields.capacity == 0, !headCompleted else { return }
        var (bytes, fields) = request.takeHeadMemory()
        guard bytes.capacity <= HTTPRequestParser.maxReusedHeadCapacity else { return }
        bytes.removeAll(keepingCapacity: true)
        fields.removeAll(keepingCapacity: true)
        head = bytes
        self.fields = fields
    }

    static let maxReusedHeadCapacity = 4096

    /// The head `advance` just reported, moved out of the parser.
    mutating func takeHead() -> HTTPRequestHead {
        precondition(headCompleted, "HTTPRequestParser: no completed head")
        headCompleted = false
        let raw = head
        let headers = HTTPHeaders(storage: raw, fields: fields)
        head = []
        fields = []
        let isHTTP11 = message.versionMinor == 1
        return HTTPRequestHead(
            method: message.method, version: isHTTP11 ? .http1_1 : .http1_0, headers: headers, raw: raw,
            target: message.target, keepAlive: message.keepAlive, expectContinue: isHTTP11 && message.expectContinue,
            isUpgrade: message.isUpgrade, bodyFraming: completedFraming)
    }

    private mutating func step(_ input: UnsafeRawBufferPointer) throws(HTTPParserError) -> (step: Step, consumed: Int) {
        let bytes = input.assumingMemoryBound(to: UInt8.self)
        let count = bytes.count
        var index = 0
        runStart = 0
        while true {
            switch state {
            case .upgraded, .failed:
                return (.needMore, index)
            case .messageEnd:
                finishMessage()
                return (.end, index)
            case .fixedBody, .chunkData:
                guard index < count else { return (.needMore, index) }
                let take = min(count - index, remaining)
                remaining -= take
                if remaining == 0 { state = state == .fixedBody ? .messageEnd : .chunkDataCR }
                return (.body(UnsafeRawBufferPointer(rebasing: input[index..<(index + take)])), index + take)
            case .start where head.isEmpty && message.leadingBytes == 0:
                if let end = parseWholeHead(bytes, from: index) {
                    try completeHead()
                    return (.head, end)
                }
            case .method:
                // Up to the longest method name; the byte after the run goes to `consume`.
                let end = min(count, headLimit)
                var length = message.methodLength
                while index < end, length < HTTPMethod.maxLength, HTTPCharacterClass.isToken(bytes[index]) {
                    length += 1
                    index += 1
                }
                message.methodLength = length
            case .version where message.versionIndex == 0 && min(count, headLimit) - index >= 8:
                // `HTTP/1.1` or `HTTP/1.0` in one go; anything else byte by byte (for the exact error).
                if let minor = HTTPRequestParser.version(UnsafeBufferPointer(rebasing: bytes[index..<(index + 8)])) {
                    message.versionMinor = minor
                    message.versionIndex = 8
                    state = .requestLineCR
                    index += 8
                }
            case .target:
                // Visible ASCII stays in the target; the byte that ends the run goes to `consume`.
                let end = min(count, headLimit)
                while index < end, HTTPCharacterClass.isTarget(bytes[index]) { index += 1 }
            case .headerName:
                let end = min(count, headLimit)
                while index < end, HTTPCharacterClass.isToken(bytes[index]) { index += 1 }
            case .headerValue:
                let end = min(count, headLimit)
                var lastVisible = -1
                while index < end {
                    let byte = bytes[index]
                    guard HTTPCharacterClass.isFieldValue(byte) else { break }
                    if !HTTPCharacterClass.isWhitespace(byte) { lastVisible = index }
                    index += 1
                }
                if lastVisible >= 0 { message.valueEnd = offset(lastVisible) + 1 }
            default:
                break
            }
            guard index < count else {
                if inHead { flush(bytes, upTo: count) }
                return (.needMore, count)
            }
            switch try consume(bytes, at: index) {
            case .nothing:
                index += 1
            case .head:
                return (.head, index + 1)
            case .end:
                return (.end, index + 1)
            }
        }
    }

    /// The position byte `index` of the current input will have in `head`.
    @inline(__always)
    private func offset(_ index: Int) -> Int { head.count + index - runStart }

    /// The first input index whose byte would make the head too large.
    private var headLimit: Int { limits.maxHeadBytes - message.leadingBytes - head.count + runStart }

    private mutating func flush(_ bytes: UnsafeBufferPointer<UInt8>, upTo end: Int) {
        if end > runStart {
            if head.capacity == 0 { head.reserveCapacity(min(1024, limits.maxHeadBytes)) }
            head.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<end]))
        }
        runStart = end
    }

    /// Calls `body` with the head bytes at `range` (head positions) of the line that ends at input
    /// index `lineEnd`: straight from the input when the line began in it, else from `head`
    /// after copying the input up to `lineEnd` there.
    private mutating func withHeadBytes<R>(
        _ range: Range<Int>, _ bytes: UnsafeBufferPointer<UInt8>, lineStart: Int, lineEnd: Int,
        _ body: (UnsafeBufferPointer<UInt8>, inout Message) throws(HTTPParserError) -> R
    ) throws(HTTPParserError) -> R {
        if lineStart >= head.count {
            let start = range.lowerBound - head.count + runStart
            return try body(UnsafeBufferPointer(rebasing: bytes[start..<(start + range.count)]), &message)
        }
        flush(bytes, upTo: lineEnd)
        // A local reference to the bytes, so `message` can be mutated in place (no struct copy).
        let copied = head
        return try copied.withUnsafeBufferPointer { buffer throws(HTTPParserError) in
            try body(UnsafeBufferPointer(rebasing: buffer[range]), &message)
        }
    }

    // swiftlint:disable:next cyclomatic_complexity function_body_length
    private mutating func consume(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int) throws(HTTPParserError) -> Produced {
        let byte = bytes[index]
        if inHead, message.leadingBytes + offset(index) >= limits.maxHeadBytes { throw .headTooLarge }
        switch state {
        case .start:
            if HTTPCharacterClass.isToken(byte) {
                inHead = true
                runStart = index
                if fields.capacity == 0 { fields.reserveCapacity(16) }
                message.methodLength = 1
                state = .method
            } else if byte == .cr {
                message.leadingBytes += 1
                if message.leadingBytes >= limits.maxHeadBytes { throw .headTooLarge }
                state = .startLF
            } else if byte == .lf {
                throw .bareLineFeed
            } else {
                throw .invalidMethod
            }

        case .startLF:
            guard byte == .lf else { throw .bareCarriageReturn }
            message.leadingBytes += 1
            state = .start

        case .method:
            if byte == .space {
                let found = try withHeadBytes(0..<message.methodLength, bytes, lineStart: 0, lineEnd: index) { name, _ in HTTPMethod(bytes: name) }
                guard let found else { throw .methodNotImplemented }
                message.method = found
                state = .targetStart
            } else if HTTPCharacterClass.isToken(byte) {
                message.methodLength += 1
                if message.methodLength > HTTPMethod.maxLength { throw .methodNotImplemented }
            } else {
                throw .invalidMethod
            }

        case .targetStart:
            guard HTTPCharacterClass.isTarget(byte) else { throw byte == .space ? .invalidRequestLine : .invalidTarget }
            message.targetStart = offset(index)
            state = .target

        case .target:
            if byte == .space {
                message.targetEnd = offset(index)
                message.versionIndex = 0
                state = .version
            } else if byte == .cr {
                // `GET /path` CRLF is an HTTP/0.9 simple request.
                throw .unsupportedVersion
            } else if !HTTPCharacterClass.isTarget(byte) {
                throw .invalidTarget
            }

        case .version:
            try consumeVersion(byte)

        case .requestLineCR:
            guard byte == .cr else { throw byte == .lf ? .bareLineFeed : .invalidRequestLine }
            state = .requestLineLF

        case .requestLineLF:
            guard byte == .lf else { throw .bareCarriageReturn }
            let range = message.targetStart..<message.targetEnd
            message.target = try withHeadBytes(range, bytes, lineStart: 0, lineEnd: index + 1) { target, _ throws(HTTPParserError) in
                try HTTPRequestTarget.parse(target, at: range.lowerBound)
            }
            state = .headerLineStart

        case .headerLineStart:
            if HTTPCharacterClass.isToken(byte) {
                message.nameStart = offset(index)
                state = .headerName
            } else if byte == .cr {
                state = .headersEndLF
            } else if HTTPCharacterClass.isWhitespace(byte) {
                throw .obsoleteLineFolding
            } else if byte == .lf {
                throw .bareLineFeed
            } else {
                throw .invalidHeaderName
            }

        case .headerName:
            if byte == .colon {
                message.nameEnd = offset(index)
                state = .headerValueStart
            } else if !HTTPCharacterClass.isToken(byte) {
                throw .invalidHeaderName
            }

        case .headerValueStart:
            if HTTPCharacterClass.isWhitespace(byte) {
                break
            } else if byte == .cr {
                message.valueStart = offset(index)
                message.valueEnd = message.valueStart
                state = .headerLineLF
            } else if HTTPCharacterClass.isFieldValue(byte) {
                message.valueStart = offset(index)
                message.valueEnd = message.valueStart + 1
                state = .headerValue
            } else {
                throw byte == .lf ? .bareLineFeed : .invalidHeaderValue
            }

        case .headerValue:
            if byte == .cr {
                state = .headerLineLF
            } else if HTTPCharacterClass.isFieldValue(byte) {
                if !HTTPCharacterClass.isWhitespace(byte) { message.valueEnd = offset(index) + 1 }
            } else {
                throw byte == .lf ? .bareLineFeed : .invalidHeaderValue
            }

        case .headerLineLF:
            guard byte == .lf else { throw .bareCarriageReturn }
            try completeHeaderLine(bytes, lineEnd: index + 1)
            state = .headerLineStart

        case .headersEndLF:
            guard byte == .lf else { throw .bareCarriageReturn }
            if head.isEmpty {
                // The whole head is in this input: one copy (into reused memory after `discardHead`).
                head.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...index]))
                runStart = index + 1
            } else {
                flush(bytes, upTo: index + 1)
            }
            try completeHead()
            return .head

        case .chunkSize:
            if let digit = HTTPCharacterClass.hexValue(byte) {
                message.chunkSizeDigits += 1
                let (shifted, overflow) = remaining.multipliedReportingOverflow(by: 16)
                let (size, carry) = shifted.addingReportingOverflow(Int(digit))
                if overflow || carry || size > (message.bodyLimit ?? limits.maxBodyBytes) - message.bodyReceived { throw .bodyTooLarge }
                remaining = size
            } else if message.chunkSizeDigits == 0 {
                throw .invalidChunkSize
            } else if byte == .cr {
                state = .chunkSizeLF
            } else if byte == .semicolon {
                message.extensionNameLength = 0
                state = .chunkExtensionName
            } else {
                throw .invalidChunkSize
            }

        case .chunkSizeLF:
            guard byte == .lf else { throw .bareCarriageReturn }
            message.chunkSizeDigits = 0
            if remaining == 0 {
                state = .trailerLineStart
            } else {
                message.bodyReceived += remaining
                state = .chunkData
            }

        case .chunkExtensionName, .chunkExtensionValueStart, .chunkExtensionToken,
             .chunkExtensionQuoted, .chunkExtensionQuotedEscape, .chunkExtensionAfterQuoted:
            try consumeChunkExtension(byte)

        case .chunkDataCR:
            guard byte == .cr else { throw .invalidChunkTerminator }
            state = .chunkDataLF

        case .chunkDataLF:
            guard byte == .lf else { throw .invalidChunkTerminator }
            state = .chunkSize

        case .trailerLineStart, .trailerName, .trailerValue, .trailerLineLF, .trailerEndLF:
            return try consumeTrailer(byte)

        case .closed:
            guard byte == .cr || byte == .lf else { throw .dataAfterClose }

        case .fixedBody, .chunkData, .messageEnd, .upgraded, .failed:
            preconditionFailure("HTTPRequestParser: state \(state) is handled by step()")
        }
        return .nothing
    }

    /// Parses a head that lies whole in `bytes` from `start` in one pass, when it is well-formed
    /// and within the limits (the common case); returns the index after it, ready for
    /// `completeHead`. Returns nil, having changed nothing but the capacity of `fields`, for
    /// anything else: the byte-by-byte path then waits for more input or finds the exact error
    /// at the exact byte, exactly as if this had not been tried.
    private mutating func parseWholeHead(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        // The head may use positions start ..< start + maxHeadBytes.
        let limit = min(bytes.count, start + limits.maxHeadBytes)
        var index = start
        while index < limit, HTTPCharacterClass.isToken(bytes[index]) { index += 1 }
        guard index > start, index - start <= HTTPMethod.maxLength, index < limit, bytes[index] == .space,
              let method = HTTPMethod(bytes: UnsafeBufferPointer(rebasing: bytes[start..<index])) else { return nil }
        index += 1
        let targetStart = index
        index = HTTPRequestParser.skip(bytes, from: index, to: limit, HTTPWordScan.plainPathStops, HTTPCharacterClass.isPlainPathByte)
        // `/` and no `?`, `#` or `%`: the path decodes to itself. A `?` after it starts the query,
        // which ends at a `#` or with the target.
        let pathEnd = index
        let plainPath = index > targetStart && bytes[targetStart] == .slash
        var queryEnd: Int?
        if plainPath, index < limit, bytes[index] == .questionMark {
            index += 1
            index = HTTPRequestParser.skip(bytes, from: index, to: limit, HTTPWordScan.queryStops, HTTPCharacterClass.isQueryByte)
            queryEnd = index
        }
        index = HTTPRequestParser.skip(bytes, from: index, to: limit, HTTPWordScan.targetStops, HTTPCharacterClass.isTarget)
        guard index > targetStart, index < limit, bytes[index] == .space else { return nil }
        let targetEnd = index
        index += 1
        guard limit - index >= 10, let minor = HTTPRequestParser.version(UnsafeBufferPointer(rebasing: bytes[index..<(index + 8)])),
              bytes[index + 8] == .cr, bytes[index + 9] == .lf else { return nil }
        index += 10
        let target: HTTPRequestTarget
        if plainPath, queryEnd != nil || pathEnd == targetEnd || bytes[pathEnd] == .hash {
            // Exactly what `HTTPRequestTarget.parse` finds for such a target, without a second pass.
            target = HTTPRequestTarget(
                targetRange: (targetStart - start)..<(targetEnd - start), pathRange: (targetStart - start)..<(pathEnd - start),
                queryRange: queryEnd.map { (pathEnd + 1 - start)..<($0 - start) })
        } else {
            guard let parsed = try? HTTPRequestTarget.parse(UnsafeBufferPointer(rebasing: bytes[targetStart..<targetEnd]), at: targetStart - start) else {
                return nil
            }
            target = parsed
        }
        var parsed = Message()
        parsed.method = method
        parsed.versionMinor = minor
        parsed.target = target
        if fields.capacity == 0 { fields.reserveCapacity(16) }
        while true {
            guard index + 1 < limit else { return giveUpWholeHead() }
            if bytes[index] == .cr {
                guard bytes[index + 1] == .lf else { return giveUpWholeHead() }
                index += 2
                break
            }
            let nameStart = index
            index = HTTPRequestParser.skip(bytes, from: index, to: limit, HTTPWordScan.nameCommonStops, HTTPCharacterClass.isToken)
            guard index > nameStart, index < limit, bytes[index] == .colon else { return giveUpWholeHead() }
            let nameEnd = index
            index += 1
            while index < limit, HTTPCharacterClass.isWhitespace(bytes[index]) { index += 1 }
            let valueStart = index
            index = HTTPRequestParser.skip(bytes, from: index, to: limit, HTTPWordScan.fieldValueStops, HTTPCharacterClass.isFieldValue)
            // Leading whitespace was skipped: the value ends after its last other byte.
            var valueEnd = index
            while valueEnd > valueStart, HTTPCharacterClass.isWhitespace(bytes[valueEnd - 1]) { valueEnd -= 1 }
            guard index + 1 < limit, bytes[index] == .cr, bytes[index + 1] == .lf, fields.count < limits.maxHeaderCount else {
                return giveUpWholeHead()
            }
            index += 2
            fields.append(HTTPHeaders.Field(
                nameStart: UInt32(nameStart - start), nameLength: UInt32(nameEnd - nameStart),
                valueStart: UInt32(valueStart - start), valueLength: UInt32(valueEnd - valueStart)))
            if nameEnd - nameStart >= 4, nameEnd - nameStart <= 17 {
                do {
                    try HTTPRequestParser.interpret(
                        name: UnsafeBufferPointer(rebasing: bytes[nameStart..<nameEnd]),
                        value: UnsafeBufferPointer(rebasing: bytes[valueStart..<valueEnd]),
                        into: &parsed)
                } catch {
                    return giveUpWholeHead()
                }
            }
        }
        message = parsed
        head.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
        inHead = true
        return index
    }

    /// The index of the first byte from `index` (before `limit`) that is not a member: whole words
    /// up to their first stop (see `HTTPWordScan`), and the byte at a stop or the last few bytes
    /// checked one by one (a stop may be a member the word check does not cover, such as a tab in
    /// a field value: the scan goes on after it).
    @inline(__always)
    private static func skip(
        _ bytes: UnsafeBufferPointer<UInt8>, from index: Int, to limit: Int, _ stops: (UInt64) -> UInt64, _ isMember: (UInt8) -> Bool
    ) -> Int {
        var index = index
        while true {
            if limit - index >= 8 {
                let run = HTTPWordScan.run(stops(HTTPWordScan.load(bytes, at: index)))
                index += run
                if run == 8 { continue }
            }
            guard index < limit, isMember(bytes[index]) else { return index }
            index += 1
        }
    }

    private mutating func giveUpWholeHead() -> Int? {
        fields.removeAll(keepingCapacity: true)
        return nil
    }

    /// The minor version of exactly `HTTP/1.1` or `HTTP/1.0`, else nil.
    @inline(__always)
    private static func version(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt8? {
        // "HTTP/1." as little-endian bytes.
        let prefix: UInt64 = 0x2E_31_2F_50_54_54_48
        let word = UInt64(littleEndian: UnsafeRawPointer(bytes.baseAddress!).loadUnaligned(as: UInt64.self))
        guard word & 0x00FF_FFFF_FFFF_FFFF == prefix else { return nil }
        switch bytes[7] {
        case 0x31: return 1
        case 0x30: return 0
        default: return nil
        }
    }

    /// `HTTP/` DIGIT `.` DIGIT, checked as each byte arrives so a bad version fails at once.
    private mutating func consumeVersion(_ byte: UInt8) throws(HTTPParserError) {
        let prefix: StaticString = "HTTP/"
        switch message.versionIndex {
        case 0..<5:
            guard byte == prefix.utf8Start[message.versionIndex] else { throw .invalidRequestLine }
        case 5:
            guard byte >= 0x30, byte <= 0x39 else { throw .invalidRequestLine }
            if byte != 0x31 { throw .unsupportedVersion }
        case 6:
            guard byte == 0x2E else { throw .invalidRequestLine }
        default:
            guard byte >= 0x30, byte <= 0x39 else { throw .invalidRequestLine }
            guard byte <= 0x31 else { throw .unsupportedVersion }
            message.versionMinor = byte - 0x30
            state = .requestLineCR
        }
        message.versionIndex += 1
    }

    private mutating func consumeChunkExtension(_ byte: UInt8) throws(HTTPParserError) {
        message.extensionBytes += 1
        if message.extensionBytes > limits.maxChunkExtensionBytes { throw .chunkExtensionsTooLarge }
        switch state {
        case .chunkExtensionName:
            if HTTPCharacterClass.isToken(byte) {
                message.extensionNameLength += 1
            } else if message.extensionNameLength == 0 {
                throw .invalidChunkExtension
            } else if byte == .cr {
                state = .chunkSizeLF
            } else if byte == .semicolon {
                message.extensionNameLength = 0
            } else if byte == .equals {
                state = .chunkExtensionValueStart
            } else {
                throw .invalidChunkExtension
            }
        case .chunkExtensionValueStart:
            if byte == .quote {
                state = .chunkExtensionQuoted
            } else if HTTPCharacterClass.isToken(byte) {
                state = .chunkExtensionToken
            } else {
                throw .invalidChunkExtension
            }
        case .chunkExtensionToken, .chunkExtensionAfterQuoted:
            if byte == .cr {
                state = .chunkSizeLF
            } else if byte == .semicolon {
                message.extensionNameLength = 0
                state = .chunkExtensionName
            } else if state == .chunkExtensionAfterQuoted || !HTTPCharacterClass.isToken(byte) {
                throw .invalidChunkExtension
            }
        case .chunkExtensionQuoted:
            if byte == .quote {
                state = .chunkExtensionAfterQuoted
            } else if byte == .backslash {
                state = .chunkExtensionQuotedEscape
            } else if !HTTPCharacterClass.isFieldValue(byte) {
                throw .invalidChunkExtension
            }
        default:
            // quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text )
            guard HTTPCharacterClass.isFieldValue(byte) else { throw .invalidChunkExtension }
            state = .chunkExtensionQuoted
        }
    }

    /// Trailer fields are checked like header fields, bounded, and dropped.
    private mutating func consumeTrailer(_ byte: UInt8) throws(HTTPParserError) -> Produced {
        message.trailerBytes += 1
        if message.trailerBytes > limits.maxHeadBytes { throw .trailersTooLarge }
        switch state {
        case .trailerLineStart:
            if HTTPCharacterClass.isToken(byte) {
                state = .trailerName
            } else if byte == .cr {
                state = .trailerEndLF
            } else {
                throw HTTPCharacterClass.isWhitespace(byte) ? .obsoleteLineFolding : (byte == .lf ? .bareLineFeed : .invalidTrailer)
            }
        case .trailerName:
            if byte == .colon {
                state = .trailerValue
            } else if !HTTPCharacterClass.isToken(byte) {
                throw .invalidTrailer
            }
        case .trailerValue:
            if byte == .cr {
                state = .trailerLineLF
            } else if !HTTPCharacterClass.isFieldValue(byte) {
                throw byte == .lf ? .bareLineFeed : .invalidTrailer
            }
        case .trailerLineLF:
            guard byte == .lf else { throw .bareCarriageReturn }
            message.trailerCount += 1
            if message.trailerCount > limits.maxHeaderCount { throw .trailersTooLarge }
            state = .trailerLineStart
        default:
            guard byte == .lf else { throw .bareCarriageReturn }
            finishMessage()
            return .end
        }
        return .nothing
    }

    /// Records the header line that just ended and applies the fields that decide framing.
    private mutating func completeHeaderLine(_ bytes: UnsafeBufferPointer<UInt8>, lineEnd: Int) throws(HTTPParserError) {
        guard fields.count < limits.maxHeaderCount else { throw .tooManyHeaders }
        let nameStart = message.nameStart
        let nameLength = message.nameEnd - nameStart
        let valueOffset = message.valueStart - nameStart
        let valueLength = message.valueEnd - message.valueStart
        fields.append(HTTPHeaders.Field(
            nameStart: UInt32(nameStart), nameLength: UInt32(nameLength),
            valueStart: UInt32(message.valueStart), valueLength: UInt32(valueLength)))
        // Only the fields that decide framing are looked at; their names have 4 to 17 bytes.
        guard nameLength >= 4, nameLength <= 17 else { return }
        try withHeadBytes(nameStart..<message.valueEnd, bytes, lineStart: nameStart, lineEnd: lineEnd) { line, message throws(HTTPParserError) in
            try HTTPRequestParser.interpret(
                name: UnsafeBufferPointer(rebasing: line[0..<nameLength]),
                value: UnsafeBufferPointer(rebasing: line[valueOffset..<(valueOffset + valueLength)]),
                into: &message)
        }
    }

    private static func interpret(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, into message: inout Message) throws(HTTPParserError) {
        switch name.count {
        case 4 where HTTPCharacterClass.equalsCaseInsensitive(name, "host"):
            message.hostCount += 1
            if message.hostCount > 1 { throw .duplicateHost }
        case 6 where HTTPCharacterClass.equalsCaseInsensitive(name, "expect"):
            if HTTPCharacterClass.equalsCaseInsensitive(value, "100-continue") {
                message.expectContinue = true
            } else if !value.isEmpty {
                message.unsupportedExpectation = true
            }
        case 7 where HTTPCharacterClass.equalsCaseInsensitive(name, "upgrade"):
            message.hasUpgrade = !value.isEmpty
        case 10 where HTTPCharacterClass.equalsCaseInsensitive(name, "connection"):
            HTTPHeaders.forEachListElement(value) { token in
                if HTTPCharacterClass.equalsCaseInsensitive(token, "close") {
                    message.connectionClose = true
                } else if HTTPCharacterClass.equalsCaseInsensitive(token, "keep-alive") {
                    message.connectionKeepAlive = true
                } else if HTTPCharacterClass.equalsCaseInsensitive(token, "upgrade") {
                    message.connectionUpgrade = true
                }
            }
        case 14 where HTTPCharacterClass.equalsCaseInsensitive(name, "content-length"):
            if message.hasTransferEncoding { throw .contentLengthWithTransferEncoding }
            if message.contentLength != nil { throw .duplicateContentLength }
            guard !value.isEmpty else { throw .invalidContentLength }
            var length = 0
            for byte in value {
                guard byte >= 0x30, byte <= 0x39 else { throw .invalidContentLength }
                let (shifted, overflow) = length.multipliedReportingOverflow(by: 10)
                let (sum, carry) = shifted.addingReportingOverflow(Int(byte - 0x30))
                if overflow || carry { throw .invalidContentLength }
                length = sum
            }
            message.contentLength = length
        case 17 where HTTPCharacterClass.equalsCaseInsensitive(name, "transfer-encoding"):
            if message.contentLength != nil { throw .contentLengthWithTransferEncoding }
            message.hasTransferEncoding = true
            try HTTPHeaders.forEachListElement(value) { (element) throws(HTTPParserError) in
                // Nothing may follow `chunked` (RFC 9112 §6.1: chunked is final and applied once).
                if message.chunkedIsFinal { throw .invalidTransferEncoding }
                var end = 0
                while end < element.count, HTTPCharacterClass.isToken(element[end]) { end += 1 }
                guard end > 0 else { throw .invalidTransferEncoding }
                var rest = end
                while rest < element.count, HTTPCharacterClass.isWhitespace(element[rest]) { rest += 1 }
                let hasParameters = rest < element.count
                if HTTPCharacterClass.equalsCaseInsensitive(UnsafeBufferPointer(rebasing: element[0..<end]), "chunked") {
                    guard !hasParameters else { throw .invalidTransferEncoding }
                    message.chunkedIsFinal = true
                } else {
                    guard !hasParameters || element[rest] == .semicolon else { throw .invalidTransferEncoding }
                    message.hasOtherCoding = true
                }
            }
        default:
            break
        }
    }

    /// The header section ended: decide framing and persistence; `takeHead` builds the head.
    private mutating func completeHead() throws(HTTPParserError) {
        inHead = false
        let isHTTP11 = message.versionMinor == 1
        let framing: HTTPBodyFraming
        if message.hasTransferEncoding {
            guard isHTTP11 else { throw .transferEncodingInHTTP10 }
            guard message.chunkedIsFinal else { throw .invalidTransferEncoding }
            guard !message.hasOtherCoding else { throw .unsupportedTransferEncoding }
            framing = .chunked
        } else if let length = message.contentLength {
            guard length <= limits.maxBodyBytes else { throw .bodyTooLarge }
            framing = .contentLength(length)
        } else {
            framing = .contentLength(0)
        }
        if message.unsupportedExpectation, isHTTP11 { throw .unsupportedExpectation }
        message.keepAlive = isHTTP11 ? !message.connectionClose : message.connectionKeepAlive && !message.connectionClose
        message.isUpgrade = isHTTP11 && message.connectionUpgrade && message.hasUpgrade
        completedFraming = framing
        headCompleted = true
        switch framing {
        case .chunked:
            remaining = 0
            state = .chunkSize
        case .contentLength(let length) where length > 0:
            remaining = length
            state = .fixedBody
        case .contentLength:
            state = .messageEnd
        }
    }

    private mutating func finishMessage() {
        if message.isUpgrade {
            state = .upgraded
        } else {
            state = message.keepAlive ? .start : .closed
        }
        message = Message()
    }
}
