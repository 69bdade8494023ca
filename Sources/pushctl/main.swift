import Foundation

// pushctl: the admin API on the command line. See `pushctl --help`.
signal(SIGPIPE, SIG_IGN)
exit(await Pushctl.main(Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment))
