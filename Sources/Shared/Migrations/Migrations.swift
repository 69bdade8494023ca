/// The schema, as versioned migrations. Append new ones; never edit an applied one.
///
/// No table holds notification content: pushes pass through Redis only, and
/// Postgres keeps subscriptions, configuration, daily counts and the activity log.
public enum Migrations {
    public static let all: [Migration] = [
        initialSchema, bindingOutlivesAuthorization, bindingOutlivesAuthorizationValidated, dailyCountTransfers,
        revocations,
    ]

    /// The version a build's queries need: its newest migration's.
    public static var newestVersion: Int { all.map(\.version).max() ?? 0 }

    static let initialSchema = Migration(
        version: 1, name: "initial schema",
        sql: """
            -- Accounts own credentials and apps; the plan sets the monthly push quota.
            CREATE TABLE accounts (
                id          text PRIMARY KEY CHECK (id <> ''),
                name        text NOT NULL DEFAULT '',
                plan        text NOT NULL DEFAULT 'lite'
                            CHECK (plan IN ('lite', 'plus', 'pro', 'enterprise')),
                created_at  timestamptz NOT NULL DEFAULT now(),
                updated_at  timestamptz NOT NULL DEFAULT now()
            );

            -- APNs token-auth keys (.p8), sealed with CREDENTIAL_KEY (AES-256-GCM).
            CREATE TABLE push_credentials (
                id               text PRIMARY KEY CHECK (id <> ''),
                account_id       text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
                team_id          text NOT NULL CHECK (team_id <> ''),
                key_id           text NOT NULL CHECK (key_id <> ''),
                sealed_key       bytea NOT NULL CHECK (octet_length(sealed_key) > 0),
                status           text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'rejected')),
                rejected_at      timestamptz,
                rejected_reason  text,
                created_at       timestamptz NOT NULL DEFAULT now(),
                UNIQUE (account_id, key_id),
                -- Target of apps' (credential, account) reference: a credential serves its own account only.
                UNIQUE (id, account_id),
                CHECK (status = 'active' OR rejected_at IS NOT NULL)
            );

            CREATE TABLE apps (
                id             text PRIMARY KEY CHECK (id <> ''),
                account_id     text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
                name           text NOT NULL DEFAULT '',
                push_enabled   boolean NOT NULL DEFAULT false,
                credential_id  text,
                created_at     timestamptz NOT NULL DEFAULT now(),
                updated_at     timestamptz NOT NULL DEFAULT now(),
                UNIQUE (id, account_id),
                -- Deleting a credential leaves its apps without one (sends fail: credential_missing).
                FOREIGN KEY (credential_id, account_id) REFERENCES push_credentials (id, account_id)
                    ON DELETE SET NULL (credential_id)
            );
            CREATE INDEX apps_account ON apps (account_id);
            CREATE INDEX apps_credential ON apps (credential_id) WHERE credential_id IS NOT NULL;

            -- iOS bundle ids: the APNs topic. Unique site-wide (also ignoring case).
            CREATE TABLE app_identifiers (
                bundle_id   text PRIMARY KEY
                            CHECK (bundle_id ~ '^[A-Za-z0-9][A-Za-z0-9.-]*$' AND length(bundle_id) <= 155),
                app_id      text NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
                created_at  timestamptz NOT NULL DEFAULT now(),
                -- Target of subscriptions' (app, topic) reference.
                UNIQUE (app_id, bundle_id)
            );
            CREATE UNIQUE INDEX app_identifiers_bundle_id_lower ON app_identifiers (lower(bundle_id));

            -- App API keys: only the SHA-256 of the key is stored.
            CREATE TABLE app_api_keys (
                id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                app_id      text NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
                name        text NOT NULL DEFAULT '',
                key_hash    bytea NOT NULL UNIQUE CHECK (octet_length(key_hash) = 32),
                scopes      text[] NOT NULL DEFAULT '{}',
                created_at  timestamptz NOT NULL DEFAULT now(),
                revoked_at  timestamptz
            );
            CREATE INDEX app_api_keys_app ON app_api_keys (app_id);

            -- Users of the platform (the App API's userId).
            CREATE TABLE users (
                id          text PRIMARY KEY CHECK (id <> ''),
                created_at  timestamptz NOT NULL DEFAULT now()
            );

            -- A user has authorized an app; required to bind a subscription to the user.
            CREATE TABLE app_authorizations (
                user_id        text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
                app_id         text NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
                authorized_at  timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (user_id, app_id)
            );
            CREATE INDEX app_authorizations_app ON app_authorizations (app_id);

            -- The user turned off this app's notifications (shared with broadcast email).
            CREATE TABLE app_unsubscribes (
                user_id     text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
                app_id      text NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
                created_at  timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (user_id, app_id)
            );
            CREATE INDEX app_unsubscribes_app ON app_unsubscribes (app_id);

            -- The app's owner disabled the user in this app.
            CREATE TABLE app_user_disables (
                user_id     text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
                app_id      text NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
                reason      text,
                created_at  timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (user_id, app_id)
            );
            CREATE INDEX app_user_disables_app ON app_user_disables (app_id);

            -- Site-wide bans: sends to a banned user's devices are skipped.
            CREATE TABLE user_bans (
                user_id    text PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
                reason     text,
                banned_at  timestamptz NOT NULL DEFAULT now()
            );

            -- Device subscriptions. Deleting the app or the identifier (topic) deletes them;
            -- revoking the user's authorization (or deleting the user) unbinds them.
            CREATE TABLE subscriptions (
                id            text PRIMARY KEY CHECK (id <> ''),
                app_id        text NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
                topic         text NOT NULL,
                device_token  text NOT NULL CHECK (device_token ~ '^[0-9A-Fa-f]+$' AND length(device_token) <= 400),
                sandbox       boolean NOT NULL,
                alert_title   text NOT NULL DEFAULT '',
                alert_body    text NOT NULL DEFAULT 'New notification',
                p256dh        bytea CHECK (octet_length(p256dh) = 65),
                auth          bytea CHECK (octet_length(auth) = 16),
                secret_hash   bytea NOT NULL CHECK (octet_length(secret_hash) = 32),
                state         text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'active')),
                user_id       text,
                created_at    timestamptz NOT NULL DEFAULT now(),
                last_seen_at  timestamptz NOT NULL DEFAULT now(),
                last_push_at  timestamptz,
                CHECK ((p256dh IS NULL) = (auth IS NULL)),
                FOREIGN KEY (app_id, topic) REFERENCES app_identifiers (app_id, bundle_id)
                    ON DELETE CASCADE ON UPDATE CASCADE,
                FOREIGN KEY (user_id, app_id) REFERENCES app_authorizations (user_id, app_id)
                    ON DELETE SET NULL (user_id)
            );
            CREATE INDEX subscriptions_app_topic ON subscriptions (app_id, topic);
            CREATE INDEX subscriptions_app_user ON subscriptions (app_id, user_id) WHERE user_id IS NOT NULL;
            -- The 60-day sweep of subscriptions not refreshed.
            CREATE INDEX subscriptions_last_seen ON subscriptions (last_seen_at);

            -- Daily send counts (never individual sends). Kept when an app is deleted.
            CREATE TABLE daily_counts (
                account_id  text NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
                app_id      text NOT NULL,
                day         date NOT NULL,
                sent        bigint NOT NULL DEFAULT 0 CHECK (sent >= 0),
                failed      bigint NOT NULL DEFAULT 0 CHECK (failed >= 0),
                gone        bigint NOT NULL DEFAULT 0 CHECK (gone >= 0),
                PRIMARY KEY (account_id, app_id, day)
            );
            CREATE INDEX daily_counts_app_day ON daily_counts (app_id, day);

            -- Configuration changes (who changed what); outlives the account it names.
            CREATE TABLE activity_log (
                id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                account_id  text,
                actor       text NOT NULL,
                action      text NOT NULL,
                subject     text NOT NULL,
                before      jsonb,
                after       jsonb,
                at          timestamptz NOT NULL DEFAULT now()
            );
            CREATE INDEX activity_log_account_at ON activity_log (account_id, at DESC);
            """)

    /// A subscription stays bound to its user when the user revokes the app's
    /// authorization (App API sends to it are then skipped, and it leaves the user's
    /// device list, until the user authorizes the app again). Unbinding it instead made
    /// it anonymous, which no unsubscribe, ban or disable applies to: revoking would
    /// have let the app's backend reach a user who had turned its notifications off.
    /// Deleting the user still unbinds. (Replaces migration 1's key to
    /// `app_authorizations`.)
    ///
    /// Dropping the old key locks subscriptions entirely, so this migration does only
    /// that and adds the new key `NOT VALID` (every existing binding met the old key, so
    /// its user exists): both are instant. The next migration, in a transaction of its
    /// own, builds the key's index and checks it, which blocks no reads.
    static let bindingOutlivesAuthorization = Migration(
        version: 2, name: "a subscription's user binding outlives the app's authorization",
        sql: """
            ALTER TABLE subscriptions DROP CONSTRAINT subscriptions_user_id_app_id_fkey;
            ALTER TABLE subscriptions ADD CONSTRAINT subscriptions_user_id_fkey
                FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE SET NULL NOT VALID;
            """)

    /// Migration 2's key: an index led by the user, which serves deleting a user (the
    /// key's `SET NULL` finds the user's subscriptions by it) and a user's device list
    /// (so it replaces `subscriptions_app_user`), then the check of the existing rows.
    /// Building the index blocks writes of subscriptions, not reads; checking blocks neither.
    static let bindingOutlivesAuthorizationValidated = Migration(
        version: 3, name: "the user binding's key indexed and checked",
        sql: """
            CREATE INDEX subscriptions_user_app ON subscriptions (user_id, app_id) WHERE user_id IS NOT NULL;
            DROP INDEX subscriptions_app_user;
            ALTER TABLE subscriptions VALIDATE CONSTRAINT subscriptions_user_id_fkey;
            """)

    /// The daily-count transfers applied (`CountTransfer`): a worker moves the counts
    /// from Redis under a transfer id and records the id in the same statement that
    /// adds them, so a transfer repeated (its answer lost, its worker dead before it
    /// could clear the counts from Redis) adds nothing twice. Ids are kept a day.
    static let dailyCountTransfers = Migration(
        version: 4, name: "daily-count transfers applied once",
        sql: """
            CREATE TABLE daily_count_transfers (
                id          text PRIMARY KEY,
                applied_at  timestamptz NOT NULL DEFAULT now()
            );
            CREATE INDEX daily_count_transfers_applied_at ON daily_count_transfers (applied_at);
            """)

    /// Revocations recorded for the dispatch workers (`RevocationLog`): each deleted
    /// subscription (however: its device, the sweep, a bundle id, app or account
    /// removed, its token dead), each app whose push was switched off, each account
    /// whose plan changed. Written by triggers in the changing transaction, so none is
    /// missed, a change by hand included; one row per deleted row, one statement each.
    /// Workers read the new ones by transaction id (`xid`: every row from a transaction
    /// at or past the oldest one in progress at their last read); the ingress's sweep
    /// deletes them after `Revocations.retentionSeconds`. `at` is the time of the change
    /// (`clock_timestamp()`), not its transaction's start, which a long transaction
    /// would leave far behind.
    static let revocations = Migration(
        version: 5, name: "revocations recorded for the workers",
        sql: """
            CREATE TABLE revocations (
                kind  text NOT NULL CHECK (kind IN ('sub', 'app', 'acct')),
                id    text NOT NULL,
                at    timestamptz NOT NULL DEFAULT clock_timestamp(),
                xid   xid8 NOT NULL DEFAULT pg_current_xact_id()
            );
            CREATE INDEX revocations_at ON revocations (at);
            CREATE INDEX revocations_xid ON revocations (xid);

            CREATE FUNCTION record_deleted_subscriptions() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO revocations (kind, id) SELECT 'sub', id FROM gone;
                RETURN NULL;
            END $$;
            CREATE TRIGGER subscriptions_revoked AFTER DELETE ON subscriptions
                REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION record_deleted_subscriptions();

            CREATE FUNCTION record_apps_switched_off() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO revocations (kind, id)
                SELECT 'app', n.id FROM before_change b JOIN after_change n ON n.id = b.id
                WHERE b.push_enabled AND NOT n.push_enabled;
                RETURN NULL;
            END $$;
            CREATE TRIGGER apps_revoked AFTER UPDATE ON apps
                REFERENCING OLD TABLE AS before_change NEW TABLE AS after_change
                FOR EACH STATEMENT EXECUTE FUNCTION record_apps_switched_off();

            CREATE FUNCTION record_plans_changed() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO revocations (kind, id)
                SELECT 'acct', n.id FROM before_change b JOIN after_change n ON n.id = b.id
                WHERE n.plan <> b.plan;
                RETURN NULL;
            END $$;
            CREATE TRIGGER accounts_revoked AFTER UPDATE ON accounts
                REFERENCING OLD TABLE AS before_change NEW TABLE AS after_change
                FOR EACH STATEMENT EXECUTE FUNCTION record_plans_changed();
            """)
}
