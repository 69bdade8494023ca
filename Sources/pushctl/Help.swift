/// pushctl's usage text.
enum Help {
    static let text = """
        pushctl: operate Pushgate through its admin API.

        Usage: pushctl [global options] <command> [arguments]

        Global options (before or after the command):
          --url URL        admin API base URL (default $PUSHGATE_ADMIN_URL, else http://127.0.0.1:8081)
          --token TOKEN    admin bearer token (default $PUSHGATE_ADMIN_TOKEN)
          --actor NAME     who is making the change, for the activity log (default $PUSHGATE_ACTOR, else admin)
          --json           print the API's JSON answer instead of readable lines
          --help           this text

        Accounts and plans (lite: no push; plus: 50,000/month; pro: 500,000; enterprise: unlimited)
          account create [--id ID] [--name NAME] [--plan PLAN]
          account list [--limit N] [--after ID]
          account show ACCOUNT
          account update ACCOUNT [--name NAME] [--plan PLAN]    (a plan change takes effect at once)
          account delete ACCOUNT
          usage ACCOUNT                                        (pushes this UTC month: used / limit)
          counts ACCOUNT [--from DAY] [--to DAY] [--app APP]   (daily sent / failed / gone per app; DAY is
                                                                YYYY-MM-DD, UTC; default this month so far)

        Push credentials (APNs .p8 keys; probed against APNs before saving, never shown again)
          credential add --account ACCOUNT --key-id KEYID --team-id TEAMID --p8 FILE   (FILE - reads stdin)
          credential list --account ACCOUNT
          credential show CREDENTIAL
          credential verify CREDENTIAL                          (probe again; a rejected one that passes is active again)
          credential delete CREDENTIAL [--detach]               (--detach: leave its apps without a credential)

        Apps and push settings
          app create --account ACCOUNT [--id ID] [--name NAME]
          app list --account ACCOUNT
          app show APP
          app rename APP NAME
          app delete APP
          app push APP [--enable | --disable] [--credential CREDENTIAL | --no-credential]
                       [--bundle-id ID]... [--bundle-ids-file FILE] [--no-bundle-ids]
                       (FILE: one bundle id per line, blank lines skipped, at least one; - for stdin;
                        bundle ids replace the app's list; removing one deletes its device subscriptions,
                        listing one in another case respells it and keeps them)

        App API keys (the key is shown once)
          app key create APP [--name NAME] [--scope SCOPE]...   (default scope push:send)
          app key list APP
          app key revoke APP KEY_ID

        Users
          user upsert USER
          user show USER
          user delete USER
          user ban USER [--reason TEXT]
          user unban USER
          user app USER --app APP [--authorized BOOL] [--unsubscribed BOOL] [--disabled BOOL] [--reason TEXT]
            (--reason with --disabled true, or alone for a user disabled in the app already)

        Activity log (newest first)
          activity [--account ACCOUNT] [--subject SUBJECT] [--limit N] [--before ENTRY_ID]
            SUBJECT is what changed: account:ID, app:ID, credential:ID or user:ID (app:ID also
            lists its users' changes, app:ID/user:USER)

        Exit status: 0 done, 1 the admin API refused (its code and message are printed), 2 bad command line
        (or a file it names cannot be read), 3 the admin API could not be reached.
        """
}
