/// A request method Parley's parser accepts.
///
/// The set is llhttp's HTTP method list minus `CONNECT` (Parley is an origin server, not a
/// proxy) and `PRI` (the HTTP/2 connection preface); any other method is answered with
/// 501 Not Implemented (RFC 9110 §9.1). Methods are case-sensitive.
public enum HTTPMethod: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case get = "GET"
    case head = "HEAD"
    case post = "POST"
    case put = "PUT"
    case delete = "DELETE"
    case options = "OPTIONS"
    case trace = "TRACE"
    case patch = "PATCH"
    case copy = "COPY"
    case lock = "LOCK"
    case mkcol = "MKCOL"
    case move = "MOVE"
    case propfind = "PROPFIND"
    case proppatch = "PROPPATCH"
    case search = "SEARCH"
    case unlock = "UNLOCK"
    case bind = "BIND"
    case rebind = "REBIND"
    case unbind = "UNBIND"
    case acl = "ACL"
    case report = "REPORT"
    case mkactivity = "MKACTIVITY"
    case checkout = "CHECKOUT"
    case merge = "MERGE"
    case mSearch = "M-SEARCH"
    case notify = "NOTIFY"
    case subscribe = "SUBSCRIBE"
    case unsubscribe = "UNSUBSCRIBE"
    case purge = "PURGE"
    case mkcalendar = "MKCALENDAR"
    case link = "LINK"
    case unlink = "UNLINK"
    case source = "SOURCE"
    case query = "QUERY"

    public var description: String { rawValue }

    /// The longest accepted method name; a longer token is refused without reading further.
    static let maxLength = 11

    /// Looks a method up by its exact bytes (no allocation).
    init?(bytes: UnsafeBufferPointer<UInt8>) {
        @inline(__always) func equals(_ literal: StaticString) -> Bool {
            guard literal.utf8CodeUnitCount == bytes.count else { return false }
            let start = literal.utf8Start
            for index in 0..<bytes.count where start[index] != bytes[index] { return false }
            return true
        }
        // The common methods first, by length, before the exhaustive scan.
        switch bytes.count {
        case 3:
            if equals("GET") { self = .get; return }
            if equals("PUT") { self = .put; return }
        case 4:
            if equals("POST") { self = .post; return }
            if equals("HEAD") { self = .head; return }
        case 6:
            if equals("DELETE") { self = .delete; return }
        case 5:
            if equals("PATCH") { self = .patch; return }
        default:
            break
        }
        for method in HTTPMethod.allCases where method.rawValue.utf8.count == bytes.count {
            if method.rawValue.utf8.elementsEqual(bytes) { self = method; return }
        }
        return nil
    }
}

/// An HTTP version; the parser accepts 1.0 and 1.1.
public struct HTTPVersion: Sendable, Hashable, CustomStringConvertible {
    public var major: Int
    public var minor: Int

    public init(major: Int, minor: Int) {
        self.major = major
        self.minor = minor
    }

    public static let http1_0 = HTTPVersion(major: 1, minor: 0)
    public static let http1_1 = HTTPVersion(major: 1, minor: 1)

    public var description: String { "HTTP/\(major).\(minor)" }
}
