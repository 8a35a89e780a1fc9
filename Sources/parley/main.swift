#if canImport(Glibc)
import Glibc
#endif
import ParleyServer

exit(CommandLineInterface.run(Array(CommandLine.arguments.dropFirst())))
