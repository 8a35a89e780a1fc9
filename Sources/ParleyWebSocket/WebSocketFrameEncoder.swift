/// Encodes frames into one byte array each (header and payload, one allocation, one copy).
///
/// A server sends unmasked frames; `maskingKey` exists for clients (and tests). The result can be
/// written to many connections: arrays are copy-on-write, so a broadcast encodes once.
public enum WebSocketFrameEncoder {
    /// A frame carrying `payload`.
    public static func encode(
        opcode: WebSocketOpcode, fin: Bool = true, payload: UnsafeRawBufferPointer, maskingKey: UInt32? = nil
    ) -> [UInt8] {
        let count = payload.count
        let headerSize = WebSocketFrameHeader.size(payloadLength: count, masked: maskingKey != nil)
        return [UInt8](unsafeUninitializedCapacity: headerSize + count) { buffer, initialized in
            let raw = UnsafeMutableRawBufferPointer(buffer)
            writeHeader(into: raw, fin: fin, opcode: opcode, payloadLength: count, maskingKey: maskingKey)
            if count > 0 {
                let body = UnsafeMutableRawBufferPointer(rebasing: raw[headerSize...])
                body.copyMemory(from: payload)
                if let maskingKey { _ = WebSocketMask.apply(key: maskingKey, phase: 0, to: body) }
            }
            initialized = headerSize + count
        }
    }

    /// A frame carrying `payload`.
    public static func encode(opcode: WebSocketOpcode, fin: Bool = true, payload: [UInt8], maskingKey: UInt32? = nil) -> [UInt8] {
        payload.withUnsafeBytes { encode(opcode: opcode, fin: fin, payload: $0, maskingKey: maskingKey) }
    }

    /// A single-frame text message; copies the string's UTF-8 straight behind the header.
    public static func text(_ text: String, maskingKey: UInt32? = nil) -> [UInt8] {
        var text = text
        return text.withUTF8 { encode(opcode: .text, payload: UnsafeRawBufferPointer($0), maskingKey: maskingKey) }
    }

    /// A single-frame binary message.
    public static func binary(_ bytes: [UInt8], maskingKey: UInt32? = nil) -> [UInt8] {
        encode(opcode: .binary, payload: bytes, maskingKey: maskingKey)
    }

    /// A close frame; no code gives an empty payload. The reason is cut to 123 bytes on a
    /// character boundary (the control-frame limit is 125 bytes including the code).
    public static func close(code: WebSocketCloseCode?, reason: String = "", maskingKey: UInt32? = nil) -> [UInt8] {
        guard let code else { return encode(opcode: .close, payload: [], maskingKey: maskingKey) }
        var payload: [UInt8] = [UInt8(code.rawValue >> 8), UInt8(code.rawValue & 0xFF)]
        payload.append(contentsOf: truncatedUTF8(reason, maxBytes: 123))
        return encode(opcode: .close, payload: payload, maskingKey: maskingKey)
    }

    /// Writes a header into the start of `buffer`, which must hold `WebSocketFrameHeader.size` bytes.
    public static func writeHeader(
        into buffer: UnsafeMutableRawBufferPointer, fin: Bool, opcode: WebSocketOpcode, payloadLength: Int, maskingKey: UInt32?
    ) {
        let maskBit: UInt8 = maskingKey == nil ? 0 : 0x80
        buffer[0] = (fin ? 0x80 : 0) | opcode.rawValue
        var index: Int
        if payloadLength < 126 {
            buffer[1] = maskBit | UInt8(payloadLength)
            index = 2
        } else if payloadLength <= 0xFFFF {
            buffer[1] = maskBit | 126
            buffer[2] = UInt8(payloadLength >> 8)
            buffer[3] = UInt8(payloadLength & 0xFF)
            index = 4
        } else {
            buffer[1] = maskBit | 127
            let length = UInt64(payloadLength)
            for i in 0..<8 { buffer[2 + i] = UInt8(truncatingIfNeeded: length >> (56 - 8 * UInt64(i))) }
            index = 10
        }
        if let maskingKey {
            buffer[index] = UInt8(maskingKey >> 24)
            buffer[index + 1] = UInt8(truncatingIfNeeded: maskingKey >> 16)
            buffer[index + 2] = UInt8(truncatingIfNeeded: maskingKey >> 8)
            buffer[index + 3] = UInt8(truncatingIfNeeded: maskingKey)
        }
    }

    /// The UTF-8 of `text`, cut to at most `maxBytes` without splitting a character.
    static func truncatedUTF8(_ text: String, maxBytes: Int) -> [UInt8] {
        let utf8 = Array(text.utf8)
        guard utf8.count > maxBytes else { return utf8 }
        var end = maxBytes
        // Back up over continuation bytes so the cut lands on a scalar boundary.
        while end > 0 && utf8[end] & 0xC0 == 0x80 { end -= 1 }
        return Array(utf8[..<end])
    }
}
