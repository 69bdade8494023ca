import Foundation
import Shared

if MigrationCommand.isRequested() {
    exit(await MigrationCommand.run(logger: Logger(component: "worker")))
}

let configuration = ServiceMain.load { () throws(ConfigurationError) in try WorkerConfiguration() }
let logger = Logger(component: "worker", minimumLevel: configuration.common.logLevel)
logger.notice("started", metadata: ["worker": configuration.workerID])
let signal = await ShutdownSignal.wait()
logger.notice("stopping", metadata: ["signal": "\(signal)"])
