/// Suspends until the continuation `register` stores is resumed. Continuations are only ever
/// resumed with a `ParleyError`; anything else (there is nothing else) reads as `.stopped`.
func withParleyContinuation<T: Sendable>(
    isolation: isolated (any Actor)? = #isolation, _ register: (CheckedContinuation<T, any Error>) -> Void
) async throws(ParleyError) -> T {
    do {
        return try await withCheckedThrowingContinuation(isolation: isolation, register)
    } catch let error as ParleyError {
        throw error
    } catch {
        throw .stopped
    }
}
