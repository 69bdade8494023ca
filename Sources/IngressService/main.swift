import Foundation
import Shared

if MigrationCommand.isRequested() {
    exit(await MigrationCommand.run(logger: Logger(component: "ingress")))
}

let configuration = ServiceMain.load { () throws(ConfigurationError) in try IngressConfiguration() }
let logger = Logger(component: "ingress", minimumLevel: configuration.common.logLevel)
let application: IngressApplication
do {
    application = try buildApplication(configuration: configuration, logger: logger)
    try application.start()
} catch {
    logger.error("cannot start", metadata: ["error": "\(error)"])
    exit(1)
}
logger.notice("started", metadata: ["listen": configuration.listen.description])
let signal = await ShutdownSignal.wait()
logger.notice("stopping", metadata: ["signal": "\(signal)"])
await application.shutdown()
logger.notice("stopped")
exit(0)
