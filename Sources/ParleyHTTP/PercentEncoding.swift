/// Percent-encoding of query values for requests Parley sends (RFC 3986 §2.1).
public enum PercentEncoding {
    /// `text` with everything but the unreserved characters (`A-Z a-z 0-9 - . _ ~`) escaped as
    /// `%XX`, so it can stand as one query parameter value.
    public static func queryValue(_ text: String) -> String {
        escaped(text)
    }

    /// `text` with everything but the unreserved characters escaped as `%XX`, and `/` kept
    /// when `keepingSlash` (a path, as AWS Signature V4 encodes object keys).
    public static func escaped(_ text: String, keepingSlash: Bool = false) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(byte)
            case UInt8(ascii: "/") where keepingSlash:
                out.append(byte)
            default:
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 15)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
