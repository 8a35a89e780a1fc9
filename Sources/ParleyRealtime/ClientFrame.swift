import ParleyJSON

/// A request id as the client sent it (a string or an integer), echoed back as `re`.
public enum RequestID: Sendable, Hashable {
    case string(String)
    case int(Int64)

    /// The id as JSON.
    public var json: JSONValue {
        switch self {
        case .string(let text): .string(text)
        case .int(let number): .int(number)
        }
    }
}

/// The first frame of a session.
public struct HelloFrame: Sendable, Equatable {
    public var sessionToken: String
    public var deviceId: String
    /// The highest seq the device has processed; events after it are replayed.
    public var resumeAfter: Int64
}

/// A message to send, from `message.send` or `POST /v1/messages`.
public struct SendMessageRequest: Sendable, Equatable {
    public var clientMessageId: String
    /// Recipients in the order given, duplicates removed.
    public var to: [String]
    public var text: String
    /// The headers as compact JSON (`{}` when none were given).
    public var headersJSON: String
}

/// A parsed client frame (sans-I/O: text in, value or `ClientFrameError` out).
public enum ClientFrame: Sendable, Equatable {
    case hello(HelloFrame)
    case send(id: RequestID, SendMessageRequest)
    case ack(id: RequestID?, upTo: Int64)
    case read(id: RequestID?, messageIds: [String])
    case presenceSubscribe(id: RequestID?, users: [String])
    case presenceUnsubscribe(id: RequestID?, users: [String])
    case typing(id: RequestID?, to: String, active: Bool)
    /// A type this parser does not know (e.g. `call.*`), for an extension handler or `unknown_type`.
    case other(type: String, id: RequestID?, object: JSONObject)
}

/// Why a frame was refused; `id` is the request id when the frame had a readable one.
public struct ClientFrameError: Error, Sendable, Equatable {
    public var code: RealtimeErrorCode
    public var message: String
    public var id: RequestID?
    /// True when the frame was a `hello` (or meant to be one).
    public var isHello: Bool

    public init(_ code: RealtimeErrorCode, _ message: String, id: RequestID? = nil, isHello: Bool = false) {
        self.code = code
        self.message = message
        self.id = id
        self.isHello = isHello
    }
}

/// Limits the parser enforces.
public struct ClientFrameLimits: Sendable {
    public var maxRecipients: Int
    public var maxTextBytes: Int
    public var maxHeaderBytes: Int
    public var maxClientMessageIDBytes: Int
    public var maxListLength: Int

    public init(maxRecipients: Int = 100, maxTextBytes: Int = 65_536, maxHeaderBytes: Int = 1024,
                maxClientMessageIDBytes: Int = 128, maxListLength: Int = 500) {
        self.maxRecipients = maxRecipients
        self.maxTextBytes = maxTextBytes
        self.maxHeaderBytes = maxHeaderBytes
        self.maxClientMessageIDBytes = maxClientMessageIDBytes
        self.maxListLength = maxListLength
    }

    public init(_ configuration: RealtimeConfiguration) {
        self.init(maxRecipients: configuration.maxRecipients, maxTextBytes: configuration.maxTextBytes,
                  maxHeaderBytes: configuration.maxHeaderBytes,
                  maxClientMessageIDBytes: configuration.maxClientMessageIDBytes,
                  maxListLength: max(configuration.maxSubscriptions, configuration.maxRecipients))
    }
}

extension ClientFrame {
    /// Longest user id accepted in a frame (Parse object ids are 10 characters).
    static let maxUserIDBytes = 64
    /// Longest device id.
    static let maxDeviceIDBytes = 128

    /// Parses one text frame.
    public static func parse(_ text: String, limits: ClientFrameLimits) throws(ClientFrameError) -> ClientFrame {
        let value: JSONValue
        do {
            value = try JSONParser(maxDepth: 16).parse(text)
        } catch {
            throw ClientFrameError(.badJSON, "frame is not valid JSON: \(error)")
        }
        guard case .object(let object) = value else { throw ClientFrameError(.badJSON, "frame is not a JSON object") }
        return try parse(object, limits: limits)
    }

    /// Parses a frame already decoded as an object.
    public static func parse(_ object: JSONObject, limits: ClientFrameLimits) throws(ClientFrameError) -> ClientFrame {
        let id = try requestID(object)
        guard let type = object["type"]?.string else {
            throw ClientFrameError(.badRequest, "\"type\" must be a string", id: id)
        }
        var fields = FieldReader(object: object, id: id)
        switch type {
        case "hello":
            fields.isHello = true
            let token = try fields.string("sessionToken", maxBytes: 256)
            let device = try fields.string("deviceId", maxBytes: maxDeviceIDBytes)
            guard isValidDeviceID(device) else {
                throw ClientFrameError(.invalidDevice, "\"deviceId\" must be 1-128 printable ASCII characters without spaces", id: id, isHello: true)
            }
            let resume = try fields.optionalInt("resumeAfter") ?? 0
            guard resume >= 0 else { throw ClientFrameError(.badRequest, "\"resumeAfter\" must not be negative", id: id, isHello: true) }
            return .hello(HelloFrame(sessionToken: token, deviceId: device, resumeAfter: resume))
        case "message.send":
            guard let id else { throw ClientFrameError(.badRequest, "\"id\" is required") }
            return .send(id: id, try SendMessageRequest.parse(object, limits: limits, id: id))
        case "ack":
            let upTo = try fields.int("upTo")
            guard upTo >= 0 else { throw ClientFrameError(.badRequest, "\"upTo\" must not be negative", id: id) }
            return .ack(id: id, upTo: upTo)
        case "message.read":
            var ids: [String]
            if object["messageIds"] != nil {
                ids = try fields.stringList("messageIds", maxCount: limits.maxListLength, maxBytes: 36)
            } else {
                ids = [try fields.string("messageId", maxBytes: 36)]
            }
            ids = ids.map { $0.lowercased() }
            guard let bad = ids.first(where: { !MessageID.isValid($0) }) else { return .read(id: id, messageIds: ids) }
            throw ClientFrameError(.badRequest, "\"\(bad)\" is not a message id", id: id)
        case "presence.subscribe":
            return .presenceSubscribe(id: id, users: try fields.stringList("users", maxCount: limits.maxListLength, maxBytes: maxUserIDBytes))
        case "presence.unsubscribe":
            return .presenceUnsubscribe(id: id, users: try fields.stringList("users", maxCount: limits.maxListLength, maxBytes: maxUserIDBytes))
        case "typing":
            let to = try fields.string("to", maxBytes: maxUserIDBytes)
            let active = try fields.optionalBool("active") ?? true
            return .typing(id: id, to: to, active: active)
        default:
            return .other(type: type, id: id, object: object)
        }
    }

    /// A device id: 1-128 bytes of printable ASCII without spaces (an installationId fits).
    public static func isValidDeviceID(_ text: String) -> Bool {
        let utf8 = text.utf8
        return !utf8.isEmpty && utf8.count <= maxDeviceIDBytes && utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }

    static func requestID(_ object: JSONObject) throws(ClientFrameError) -> RequestID? {
        switch object["id"] {
        case nil, .null?: return nil
        case .string(let text)?:
            guard text.utf8.count <= 128 else { throw ClientFrameError(.badRequest, "\"id\" is longer than 128 bytes") }
            return .string(text)
        case .int(let number)?: return .int(number)
        default: throw ClientFrameError(.badRequest, "\"id\" must be a string or an integer")
        }
    }
}

extension SendMessageRequest {
    /// Validates the fields of a `message.send` frame or a `POST /v1/messages` body.
    public static func parse(_ object: JSONObject, limits: ClientFrameLimits, id: RequestID?) throws(ClientFrameError) -> SendMessageRequest {
        let fields = FieldReader(object: object, id: id)
        let clientMessageId = try fields.string("clientMessageId", maxBytes: limits.maxClientMessageIDBytes)
        guard case .array(let list)? = object["to"] else {
            throw ClientFrameError(.badRequest, "\"to\" must be an array of user ids", id: id)
        }
        guard !list.isEmpty else { throw ClientFrameError(.badRequest, "\"to\" must not be empty", id: id) }
        guard list.count <= limits.maxRecipients else {
            throw ClientFrameError(.tooManyRecipients, "at most \(limits.maxRecipients) recipients", id: id)
        }
        var to: [String] = []
        var seen = Set<String>()
        for item in list {
            guard case .string(let user) = item, !user.isEmpty, user.utf8.count <= ClientFrame.maxUserIDBytes, !user.containsNUL else {
                throw ClientFrameError(.badRequest, "\"to\" must hold user ids (strings of 1-\(ClientFrame.maxUserIDBytes) bytes)", id: id)
            }
            if seen.insert(user).inserted { to.append(user) }
        }
        guard case .string(let text)? = object["text"] else {
            throw ClientFrameError(.badRequest, "\"text\" must be a string", id: id)
        }
        guard text.utf8.count <= limits.maxTextBytes else {
            throw ClientFrameError(.textTooLong, "\"text\" is longer than \(limits.maxTextBytes) bytes", id: id)
        }
        guard !text.containsNUL else { throw ClientFrameError(.badRequest, "\"text\" must not contain NUL", id: id) }
        var headersJSON = "{}"
        switch object["headers"] {
        case nil, .null?:
            break
        case .object(let headers)?:
            headersJSON = JSONValue.object(headers).serialized()
            guard headersJSON.utf8.count <= limits.maxHeaderBytes else {
                throw ClientFrameError(.headersTooLarge, "\"headers\" is larger than \(limits.maxHeaderBytes) bytes", id: id)
            }
            guard !headersJSON.contains("\\u0000") else {
                throw ClientFrameError(.badRequest, "\"headers\" must not contain NUL", id: id)
            }
        default:
            throw ClientFrameError(.badRequest, "\"headers\" must be an object", id: id)
        }
        return SendMessageRequest(clientMessageId: clientMessageId, to: to, text: text, headersJSON: headersJSON)
    }
}

/// Reads typed fields with uniform error messages.
struct FieldReader {
    let object: JSONObject
    let id: RequestID?
    var isHello = false

    func fail(_ message: String) -> ClientFrameError {
        ClientFrameError(.badRequest, message, id: id, isHello: isHello)
    }

    func string(_ name: String, maxBytes: Int) throws(ClientFrameError) -> String {
        guard case .string(let text)? = object[name], !text.isEmpty else { throw fail("\"\(name)\" must be a non-empty string") }
        guard text.utf8.count <= maxBytes else { throw fail("\"\(name)\" is longer than \(maxBytes) bytes") }
        guard !text.containsNUL else { throw fail("\"\(name)\" must not contain NUL") }
        return text
    }

    func int(_ name: String) throws(ClientFrameError) -> Int64 {
        guard let number = try optionalInt(name) else { throw fail("\"\(name)\" must be an integer") }
        return number
    }

    func optionalInt(_ name: String) throws(ClientFrameError) -> Int64? {
        switch object[name] {
        case nil, .null?: return nil
        case let value?:
            guard let number = value.int else { throw fail("\"\(name)\" must be an integer") }
            return number
        }
    }

    func optionalBool(_ name: String) throws(ClientFrameError) -> Bool? {
        switch object[name] {
        case nil, .null?: return nil
        case .bool(let flag)?: return flag
        default: throw fail("\"\(name)\" must be a boolean")
        }
    }

    func stringList(_ name: String, maxCount: Int, maxBytes: Int) throws(ClientFrameError) -> [String] {
        guard case .array(let list)? = object[name] else { throw fail("\"\(name)\" must be an array of strings") }
        guard list.count <= maxCount else { throw fail("\"\(name)\" has more than \(maxCount) entries") }
        var result: [String] = []
        result.reserveCapacity(list.count)
        for item in list {
            guard case .string(let text) = item, !text.isEmpty, text.utf8.count <= maxBytes, !text.containsNUL else {
                throw fail("\"\(name)\" must hold strings of 1-\(maxBytes) bytes")
            }
            result.append(text)
        }
        return result
    }
}

extension String {
    /// Whether the string has a NUL character (PostgreSQL text cannot hold one).
    var containsNUL: Bool {
        if let found = utf8.withContiguousStorageIfAvailable({ buffer in buffer.contains(0) }) { return found }
        return utf8.contains(0)
    }
}
