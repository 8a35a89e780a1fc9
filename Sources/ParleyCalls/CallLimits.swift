/// Bounds on what call frames may carry.
public struct CallLimits: Sendable, Equatable {
    /// Bytes of an SDP offer or answer.
    public var maxSDPBytes: Int
    /// Bytes of an invite's `headers` (compact JSON).
    public var maxHeaderBytes: Int
    /// Candidates in one `call.candidates` frame.
    public var maxCandidatesPerFrame: Int
    /// Bytes of one candidate (compact JSON).
    public var maxCandidateBytes: Int

    public init(maxSDPBytes: Int = 64 * 1024, maxHeaderBytes: Int = 1024, maxCandidatesPerFrame: Int = 64, maxCandidateBytes: Int = 2048) {
        self.maxSDPBytes = maxSDPBytes
        self.maxHeaderBytes = maxHeaderBytes
        self.maxCandidatesPerFrame = maxCandidatesPerFrame
        self.maxCandidateBytes = maxCandidateBytes
    }
}
