/// Raw option values from defaults, the environment and flags (flags win), with typed access.
public struct ConfigValues: Sendable {
    public let options: [ConfigOption]
    private var values: [String: String] = [:]
    private var origins: [String: String] = [:]
    /// Arguments that are not options (sub-command operands).
    public private(set) var operands: [String] = []

    /// Resolves `options` from `environment` and then `arguments` (flags override variables).
    public init(options: [ConfigOption], arguments: [String], environment: [String: String]) throws(ConfigError) {
        self.options = options
        for option in options {
            values[option.key] = option.defaultValue
            if let name = option.environment, let value = environment[name] {
                values[option.key] = value
                origins[option.key] = name
            }
        }
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            guard argument.hasPrefix("--"), argument.count > 2 else {
                operands.append(argument)
                continue
            }
            var name = String(argument.dropFirst(2))
            var inline: String?
            if let equals = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            guard let option = options.first(where: { $0.key == name }) else { throw .unknownFlag(argument) }
            if option.isSwitch {
                values[name] = inline ?? "true"
            } else if let inline {
                values[name] = inline
            } else {
                guard index < arguments.count else { throw .missingValue(argument) }
                values[name] = arguments[index]
                index += 1
            }
            origins[name] = "--\(name)"
        }
    }

    /// The raw value of `key`.
    public func string(_ key: String) -> String {
        guard let value = values[key] else { preconditionFailure("undeclared option \(key)") }
        return value
    }

    /// The value, or nil when it is empty.
    public func optionalString(_ key: String) -> String? {
        let value = string(key)
        return value.isEmpty ? nil : value
    }

    public func int(_ key: String, in range: ClosedRange<Int> = 0...Int.max) throws(ConfigError) -> Int {
        let raw = string(key)
        guard let value = Int(raw), range.contains(value) else {
            throw .invalidValue(option: origin(key), value: raw, expected: "an integer in \(range.lowerBound)...\(range.upperBound)")
        }
        return value
    }

    public func bool(_ key: String) throws(ConfigError) -> Bool {
        let raw = string(key).lowercased()
        switch raw {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off", "": return false
        default: throw .invalidValue(option: origin(key), value: raw, expected: "true or false")
        }
    }

    /// A duration written `250ms`, `10s`, `5m`, `2h`, `30d`, or plain seconds.
    public func duration(_ key: String) throws(ConfigError) -> Duration {
        let raw = string(key)
        guard let value = ConfigValues.parseDuration(raw) else {
            throw .invalidValue(option: origin(key), value: raw, expected: "a duration like 500ms, 10s, 5m, 2h or 30d")
        }
        return value
    }

    /// A comma-separated list (empty entries dropped).
    public func list(_ key: String) -> [String] {
        string(key).split(separator: ",").map { String($0).trimmingSpaces() }.filter { !$0.isEmpty }
    }

    /// Where a value came from, for error messages.
    public func origin(_ key: String) -> String { origins[key] ?? "--\(key)" }

    static func parseDuration(_ text: String) -> Duration? {
        let units: [(String, Int64)] = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)]
        for (suffix, millis) in units where text.hasSuffix(suffix) {
            let number = text.dropLast(suffix.count)
            if suffix == "s" && number.hasSuffix("m") { continue }
            guard let n = Int64(number), n >= 0 else { return nil }
            return .milliseconds(n * millis)
        }
        guard let seconds = Int64(text), seconds >= 0 else { return nil }
        return .seconds(seconds)
    }
}

extension String {
    func trimmingSpaces() -> String {
        var scalars = Substring(self)
        while let first = scalars.first, first == " " || first == "\t" { scalars.removeFirst() }
        while let last = scalars.last, last == " " || last == "\t" { scalars.removeLast() }
        return String(scalars)
    }
}
