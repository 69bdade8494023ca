import Foundation
import Shared

if MigrationCommand.isRequested() {
    exit(await MigrationCommand.run(logger: Logger(component: "ingress")))
}

let configuration = ServiceMain.load { () throws(ConfigurationError) in try IngressConfiguration() }
let logger = Logger(component: "ingress", minimumLevel: configuration.common.logLevel)
logger.notice("started", metadata: ["listen": configuration.listen.description])
let signal = await ShutdownSignal.wait()
logger.notice("stopping", metadata: ["signal": "\(signal)"])
