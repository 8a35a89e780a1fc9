import ParleyNet

/// The opaque label of a device as other users see it (the calls module's `call.answered` and
/// call history): HMAC-SHA256 under the database's label key of the user id and the device id,
/// 24 hex digits. Stable for a device on every node, different for the same device id of
/// another user, and it reveals nothing of the id (an installationId, which lets its holder save
/// the installation).
public enum DeviceLabel {
    public static func make(key: [UInt8], device: DeviceKey) -> String {
        let message = Array(device.userId.utf8) + [0] + Array(device.deviceId.utf8)
        let digest = HMACDigest.sha256(key: key, message: message)
        let hex = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(24)
        for byte in digest.prefix(12) {
            text.append(hex[Int(byte >> 4)])
            text.append(hex[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
