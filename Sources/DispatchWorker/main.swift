import Foundation
import Shared

if MigrationCommand.isRequested() {
    exit(await MigrationCommand.run(logger: Logger(component: "worker")))
}
if DeadLetterReplay.isRequested() {
    exit(await DeadLetterReplay.run(logger: Logger(component: "worker")))
}

let configuration = ServiceMain.load { () throws(ConfigurationError) in try WorkerConfiguration() }
let logger = Logger(component: "worker", minimumLevel: configuration.common.logLevel)
let worker: WorkerApplication
do {
    worker = try buildWorker(configuration: configuration, logger: logger)
    try await worker.start()
} catch {
    logger.error("cannot start", metadata: ["error": "\(error)"])
    exit(1)
}
logger.notice(
    "started",
    metadata: [
        "worker": configuration.workerID, "streams": configuration.streams.joined(separator: ","),
        "metrics": "\(configuration.metricsListen.host):\(worker.metricsPort)",
    ])
Task { await RedisEvictionPolicy.report(worker.redis, logger: logger) }
let signal = await ShutdownSignal.wait()
logger.notice("stopping", metadata: ["signal": "\(signal)"])
let clean = await worker.shutdown(deadline: .seconds(configuration.shutdownTimeoutSeconds))
logger.notice("stopped", metadata: ["clean": "\(clean)"])
exit(0)
