import ParleyHTTP
import ParleyJSON

/// A registered webhook: a cloud function or a class trigger (a row of Parse's `_Hooks`).
public enum Hook: Sendable, Equatable {
    case function(name: String, url: String)
    case trigger(className: String, trigger: TriggerName, url: String)

    public var url: String {
        switch self {
        case .function(_, let url), .trigger(_, _, let url): url
        }
    }

    /// The hook as Parse Server answers it (no `objectId`).
    public var json: JSONObject {
        switch self {
        case .function(let name, let url): ["functionName": .string(name), "url": .string(url)]
        case .trigger(let className, let trigger, let url): ["className": .string(className), "triggerName": .string(trigger.rawValue), "url": .string(url)]
        }
    }

    /// A declaration from a request body (`functionName`+`url`, or `className`+`triggerName`+`url`),
    /// as Parse's `createOrUpdateHook` reads it.
    /// Longest hook URL and function or class name accepted.
    public static let maxURLBytes = 2048
    public static let maxNameBytes = 128

    public init(declaration body: JSONObject) throws(CloudError) {
        guard let url = body["url"]?.string, !url.isEmpty, url.utf8.count <= Self.maxURLBytes else { throw .invalidHook }
        for key in ["functionName", "className"] where (body[key]?.string?.utf8.count ?? 0) > Self.maxNameBytes { throw .invalidHook }
        if let name = body["functionName"]?.string, !name.isEmpty {
            self = .function(name: name, url: url)
        } else if let className = body["className"]?.string, !className.isEmpty,
                  let name = body["triggerName"]?.string, let trigger = TriggerName(rawValue: name),
                  trigger.requiredClassName.map({ $0 == className }) ?? !TriggerName.isTrafficClass(className) {
            self = .trigger(className: className, trigger: trigger, url: url)
        } else {
            throw .invalidHook
        }
        guard HTTPClientURL(url) != nil else { throw .unsupportedURL(url) }
    }
}
