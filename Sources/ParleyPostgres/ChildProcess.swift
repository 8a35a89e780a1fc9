#if canImport(Glibc)
import Glibc
#endif

/// How a child process ended.
public enum ExitStatus: Sendable, Equatable, CustomStringConvertible {
    case exited(Int32)
    case signaled(Int32)

    /// True for a zero exit code.
    public var isSuccess: Bool { self == .exited(0) }

    public var description: String {
        switch self {
        case .exited(let code): "exit code \(code)"
        case .signaled(let signal): "killed by signal \(signal)"
        }
    }
}

/// Failure to start or wait for a child process.
public enum ChildProcessError: Error, Sendable, Equatable {
    case spawnFailed(executable: String, errno: Int32)
    case waitFailed(pid: Int32, errno: Int32)
    case outputFileUnusable(path: String, errno: Int32)
    /// The C library cannot set a child's working directory (glibc before 2.29).
    case workingDirectoryUnsupported(String)
}

/// A child process started with `posix_spawn`, without Foundation.
///
/// The child gets `/dev/null` as standard input, standard output and error go to `outputPath`
/// (appended) or `/dev/null`, inherited descriptors above 2 are closed, the signal mask is
/// cleared and signal dispositions reset (the event loops block SIGTERM/SIGINT for signalfd).
/// It runs in `workingDirectory` when given, else in ours.
public struct ChildProcess: Sendable {
    /// Process id of the child.
    public let pid: pid_t
    /// Path that was executed.
    public let executable: String

    /// Starts `executable` (an absolute path) with `arguments` (not including argv[0]).
    /// `environment` entries are `KEY=value`; nil inherits the parent's environment.
    public static func spawn(
        _ executable: String,
        arguments: [String],
        environment: [String]? = nil,
        outputPath: String? = nil,
        workingDirectory: String? = nil
    ) throws(ChildProcessError) -> ChildProcess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        if let outputPath {
            let fd = open(outputPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw .outputFileUnusable(path: outputPath, errno: errno) }
            close(fd)
        }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        let outputTarget = outputPath ?? "/dev/null"
        posix_spawn_file_actions_addopen(&actions, 1, outputTarget, O_WRONLY | O_APPEND, 0)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        closeInheritedDescriptors(&actions)
        if let workingDirectory { try changeDirectory(&actions, workingDirectory) }

        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM] {
            sigaddset(&defaults, signal)
        }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = CStringArray([executable] + arguments)
        let envp = environment.map(CStringArray.init)
        var pid: pid_t = 0
        let result = withExtendedLifetime((argv, envp)) {
            posix_spawn(&pid, executable, &actions, &attributes, argv.pointers, envp?.pointers ?? environ)
        }
        guard result == 0 else { throw .spawnFailed(executable: executable, errno: result) }
        return ChildProcess(pid: pid, executable: executable)
    }

    /// Starts the process and waits for it to end.
    public static func run(
        _ executable: String,
        arguments: [String],
        environment: [String]? = nil,
        outputPath: String? = nil,
        workingDirectory: String? = nil
    ) throws(ChildProcessError) -> ExitStatus {
        try spawn(executable, arguments: arguments, environment: environment, outputPath: outputPath,
                  workingDirectory: workingDirectory).wait()
    }

    /// Blocks until the child ends and returns how it ended.
    public func wait() throws(ChildProcessError) -> ExitStatus {
        var status: Int32 = 0
        while true {
            let r = waitpid(pid, &status, 0)
            if r == pid { break }
            if r < 0 && errno == EINTR { continue }
            throw .waitFailed(pid: pid, errno: errno)
        }
        let signal = status & 0x7f
        if signal == 0 { return .exited((status >> 8) & 0xff) }
        return .signaled(signal)
    }

    /// Adds "change to `directory`" (glibc 2.29+, looked up at run time like `closefrom`).
    private static func changeDirectory(_ actions: inout posix_spawn_file_actions_t, _ directory: String) throws(ChildProcessError) {
        typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addchdir_np") else {
            throw .workingDirectoryUnsupported(directory)
        }
        let addChdir = unsafeBitCast(symbol, to: AddChdir.self)
        let result = addChdir(&actions, directory)
        if result != 0 { throw .spawnFailed(executable: "chdir \(directory)", errno: result) }
    }

    /// Adds "close every descriptor from 3 up" when glibc has it (2.34+), so the child never holds
    /// our sockets or epoll descriptors. Looked up at run time: the Glibc module hides `_np` calls.
    private static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return }
        let closeFrom = unsafeBitCast(symbol, to: CloseFrom.self)
        _ = closeFrom(&actions, 3)
    }
}

/// A NULL-terminated `char *[]` that owns its strings.
final class CStringArray {
    let pointers: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>
    private let count: Int

    init(_ strings: [String]) {
        count = strings.count
        pointers = .allocate(capacity: strings.count + 1)
        for (i, s) in strings.enumerated() { pointers[i] = strdup(s) }
        pointers[strings.count] = nil
    }

    deinit {
        for i in 0..<count { free(pointers[i]) }
        pointers.deallocate()
    }
}
