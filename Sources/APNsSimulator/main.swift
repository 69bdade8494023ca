import Foundation
import Shared

// apns-simulator --config <file.json> --listen 127.0.0.1:2197 --control 127.0.0.1:2198 --ca-out <path>
// A strict stand-in for Apple's APNs; see README.md beside this file.
ShutdownSignal.ignoreHangUp()
if CommandLine.arguments.dropFirst().contains(where: { $0 == "--help" || $0 == "-h" }) {
    print(SimulatorArguments.usage)
    exit(0)
}
let arguments: SimulatorArguments
do {
    arguments = try SimulatorArguments(CommandLine.arguments.dropFirst())
} catch {
    FileHandle.standardError.write(Data("apns-simulator: \(error)\n\(SimulatorArguments.usage)\n".utf8))
    exit(2)
}
let logger = Logger(component: "apns-simulator", minimumLevel: arguments.logLevel)
let configuration: SimulatorConfiguration
do {
    configuration = try SimulatorConfiguration(contentsOfFile: arguments.configPath)
} catch {
    FileHandle.standardError.write(Data("apns-simulator: \(error)\n".utf8))
    exit(2)
}
let application: SimulatorApplication
do {
    application = try await SimulatorApplication.start(
        configuration: configuration, listen: arguments.listen, control: arguments.control,
        caFile: arguments.caFile, logger: logger)
} catch {
    logger.error("cannot start", metadata: ["error": "\(error)"])
    exit(1)
}
// One write(2), so a reader of the pipe gets the whole line at once.
FileHandle.standardOutput.write(Data((application.readyLine + "\n").utf8))
logger.info("ready", metadata: ["listen": "\(application.listenAddress)", "control": "\(application.controlAddress)"])
let signalNumber = await ShutdownSignal.wait()
logger.info("shutting down", metadata: ["signal": "\(signalNumber)"])
await application.shutdown()
exit(0)
