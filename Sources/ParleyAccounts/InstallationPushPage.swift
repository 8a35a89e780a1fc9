import ParleyJSON
import ParleyPostgres

/// One installation a push goes to: what a push job needs.
public struct PushTarget: Sendable {
    public let objectId: String
    public let installationId: String
    public let userId: String?
    public let deviceType: String?
    public let token: String?
    /// The installation's badge after this push (when the push sets or increments it).
    public let badge: Int64?
}

extension InstallationStore {
    /// How a push changes the badge of the iOS installations it goes to.
    public enum BadgeChange: Sendable, Equatable {
        case none
        case set(Int64)
        case increment(Int64)
    }

    /// The next page of installations matching `where` (Parse's query over `_Installation`, as
    /// the master key sees it) after `cursor` in objectId order, at most `limit`; iOS ones have
    /// their badge changed by `badge` in the same statement. Run each page in its own transaction
    /// with the jobs it queues.
    public func pushPage(where condition: JSONValue, after cursor: String?, limit: Int, badge: BadgeChange,
                         on db: any SQLExecutor) async throws(ParseError) -> [PushTarget] {
        var conditions: [JSONValue] = [condition]
        if let cursor { conditions.append(["objectId": ["$gt": .string(cursor)]]) }
        let query: ParseQuery
        let compiled: CompiledQuery
        do {
            query = try ParseQuery.fromJSON(className: ClassName.installation, body: [
                "where": ["$and": .array(conditions)], "order": "objectId", "limit": .string(String(limit)), "keys": "objectId",
            ])
            compiled = try QueryCompiler.compileSelect(query, layout: TableLayout.forClass(ClassName.installation), readerIDs: nil)
        } catch {
            throw ParseError(error)
        }
        let parameter = compiled.parameters.count + 1
        let (mode, amount): (String, Int64) = switch badge {
        case .none: ("none", 0)
        case .set(let value): ("set", value)
        case .increment(let value): ("increment", value)
        }
        let sql = """
            WITH page AS (\(compiled.sql)),
            bumped AS (
                UPDATE installations i
                   SET data = jsonb_set(i.data, '{badge}', to_jsonb(CASE WHEN $\(parameter) = 'set' THEN $\(parameter + 1)::bigint
                       ELSE (CASE WHEN jsonb_typeof(i.data->'badge') = 'number' THEN (i.data->>'badge')::numeric::bigint ELSE 0 END) + $\(parameter + 1)::bigint END)),
                       updated_at = now()
                  FROM page p
                 WHERE i.object_id = p.object_id AND $\(parameter) <> 'none' AND i.device_type = 'ios'
                RETURNING i.object_id, (i.data->>'badge')::bigint AS badge
            )
            SELECT i.object_id, i.installation_id, i.device_type, i.device_token, i.user_id, b.badge
              FROM page p JOIN installations i ON i.object_id = p.object_id LEFT JOIN bumped b ON b.object_id = i.object_id
             ORDER BY i.object_id
            """
        let rows = try await db.run(sql, compiled.parameters + [.text(mode), .int(Int(amount))])
        return rows.compactMap { row in
            guard let objectId = row["object_id"].string, let installationId = row["installation_id"].string else { return nil }
            return PushTarget(objectId: objectId, installationId: installationId, userId: row["user_id"].string, deviceType: row["device_type"].string,
                              token: row["device_token"].string, badge: row["badge"].int.map(Int64.init))
        }
    }
}
