import Foundation
import Shared

ShutdownSignal.ignoreHangUp()
let usage = """
    usage: ingress-service            run the ingress (configured by the environment: deploy/README.md)
           ingress-service migrate    apply pending database migrations (DATABASE_URL) and exit
    """
if ServiceMain.command(usage: usage, commands: [MigrationCommand.name]) == MigrationCommand.name {
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
// The bound port, so `INGRESS_LISTEN` may say port 0.
logger.notice(
    "started",
    metadata: ["listen": ListenAddress(host: configuration.listen.host, port: application.port).description])
Task { await RedisEvictionPolicy.report(application.redis, logger: logger) }
let signal = await ShutdownSignal.wait()
logger.notice("stopping", metadata: ["signal": "\(signal)"])
await application.shutdown()
logger.notice("stopped")
exit(0)
