import Foundation
import Shared

ShutdownSignal.ignoreHangUp()
let usage = """
    usage: dispatch-worker                        run a worker (configured by the environment: deploy/README.md)
           dispatch-worker migrate                apply pending database migrations (DATABASE_URL) and exit
           dispatch-worker replay-dead-letters    put unreadable dead letters back on WORKER_STREAMS and exit
    """
switch ServiceMain.command(usage: usage, commands: [MigrationCommand.name, DeadLetterReplay.name]) {
case MigrationCommand.name?: exit(await MigrationCommand.run(logger: Logger(component: "worker")))
case DeadLetterReplay.name?: exit(await DeadLetterReplay.run(logger: Logger(component: "worker")))
default: break
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
        "metrics": ListenAddress(host: configuration.metricsListen.host, port: worker.metricsPort).description,
    ])
Task { await RedisEvictionPolicy.report(worker.redis, logger: logger) }
let signal = await ShutdownSignal.wait()
logger.notice("stopping", metadata: ["signal": "\(signal)"])
let clean = await worker.shutdown(deadline: .seconds(configuration.shutdownTimeoutSeconds))
logger.notice("stopped", metadata: ["clean": "\(clean)"])
exit(0)
