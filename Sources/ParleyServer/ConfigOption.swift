/// One configuration setting: its flag, environment variable, default and help line.
///
/// The table of options is the single source for parsing, `--help` and docs/configuration.md.
public struct ConfigOption: Sendable {
    public let key: String
    public let environment: String?
    public let defaultValue: String
    public let help: String
    /// Boolean switches take no value on the command line.
    public let isSwitch: Bool

    public init(_ key: String, env: String?, default defaultValue: String, _ help: String, isSwitch: Bool = false) {
        self.key = key
        self.environment = env
        self.defaultValue = defaultValue
        self.help = help
        self.isSwitch = isSwitch
    }

    /// `--key`.
    public var flag: String { "--\(key)" }
}

/// What is wrong with a flag or environment variable.
public enum ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    case unknownFlag(String)
    case missingValue(String)
    case invalidValue(option: String, value: String, expected: String)

    public var description: String {
        switch self {
        case .unknownFlag(let flag): "unknown option \(flag) (see --help)"
        case .missingValue(let flag): "option \(flag) needs a value"
        case .invalidValue(let option, let value, let expected): "invalid value '\(value)' for \(option): expected \(expected)"
        }
    }
}
