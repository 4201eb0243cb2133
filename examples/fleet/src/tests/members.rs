//! The member flags: where members come from, their leave policy, and the environment.

use clap::CommandFactory as _;

use super::*;

fn members_of(args: &[&str]) -> Result<MemberFlags, clap::Error> {
    let cli = Cli::try_parse_from(["fleet", "run"].iter().chain(args))?;
    match cli.command {
        Command::Run { operator, .. } => Ok(operator.members),
        other => panic!("not `run`: {other:?}"),
    }
}

#[test]
fn run_takes_members_from_secrets_with_a_namespace_and_a_leave_policy() {
    use members_cli::MemberLeavePolicy;
    let selector = "kubeplex.io/fleet=prod";
    // Defaults: the operator's namespace, and the children deleted when a member leaves.
    let members = members_of(&["--members-from-secrets", selector]).unwrap();
    assert_eq!(members.members_from_secrets.as_deref(), Some(selector));
    assert_eq!(members.members_namespace, kubeplex_fleet::MEMBERS_NAMESPACE);
    assert_eq!(members.member_leave_policy, MemberLeavePolicy::Delete);
    assert!(members.takes_members());
    assert_eq!(
        members.leave_policy(),
        kubeplex::members::LeavePolicy::Delete
    );

    let members = members_of(&[
        "--members-from-secrets",
        selector,
        "--members-namespace",
        "fleet-system",
        "--member-leave-policy",
        "orphan",
    ])
    .unwrap();
    assert_eq!(members.members_namespace, "fleet-system");
    assert_eq!(
        members.leave_policy(),
        kubeplex::members::LeavePolicy::Orphan
    );
    // With the typed contexts' other flags.
    let cli = Cli::try_parse_from([
        "fleet",
        "run",
        "--leader-election",
        "--members-from-secrets",
        selector,
    ]);
    assert!(matches!(
        cli.unwrap().command,
        Command::Run {
            operator: OperatorFlags {
                leader_election: true,
                ..
            },
            ..
        }
    ));
}

#[test]
fn the_member_flags_need_a_selector_and_refuse_bad_values() {
    for args in [
        &["--members-namespace", "fleet-system"][..],
        &["--member-leave-policy", "orphan"],
    ] {
        let refused = members_of(args).unwrap_err();
        assert_eq!(
            refused.kind(),
            clap::error::ErrorKind::MissingRequiredArgument,
            "{args:?}: {refused}"
        );
        assert!(
            refused
                .to_string()
                .contains("--members-from-secrets <SELECTOR>"),
            "{refused}"
        );
    }
    let empty = members_of(&["--members-from-secrets", " "])
        .unwrap_err()
        .to_string();
    assert!(
        empty.contains("an empty one would take every Secret of the namespace"),
        "{empty}"
    );
    let policy = members_of(&[
        "--members-from-secrets",
        "a=b",
        "--member-leave-policy",
        "keep",
    ]);
    let policy = policy.unwrap_err().to_string();
    assert!(
        policy.contains("[possible values: delete, orphan]"),
        "{policy}"
    );
}

/// Each member flag can come from the environment, as the Deployment in deploy/ may set it (the values
/// themselves are read from a real environment in tests/operator/cli.rs).
#[test]
fn the_member_flags_are_also_environment_variables() {
    let command = Cli::command();
    let run = command.find_subcommand("run").unwrap();
    let env_of = |id: &str| {
        let arg = run.get_arguments().find(|a| a.get_id() == id).unwrap();
        arg.get_env().map(|e| e.to_string_lossy().into_owned())
    };
    assert_eq!(
        env_of("members_from_secrets").as_deref(),
        Some("FLEET_MEMBERS_FROM_SECRETS")
    );
    assert_eq!(
        env_of("members_namespace").as_deref(),
        Some("FLEET_MEMBERS_NAMESPACE")
    );
    assert_eq!(
        env_of("member_leave_policy").as_deref(),
        Some("FLEET_MEMBER_LEAVE_POLICY")
    );
}

#[test]
fn run_takes_members_from_cluster_profiles_or_cluster_api_one_source_at_a_time() {
    let members = members_of(&[
        "--members-from-cluster-profiles",
        "fleet-system",
        "--access-providers",
        "/etc/fleet/access-providers.json",
    ])
    .unwrap();
    assert_eq!(
        members.members_from_cluster_profiles.as_deref(),
        Some("fleet-system")
    );
    assert!(members.takes_members());
    let members = members_of(&["--members-from-cluster-api", "capi-system"]).unwrap();
    assert_eq!(
        members.members_from_cluster_api.as_deref(),
        Some("capi-system")
    );
    assert_eq!(
        members.leave_policy(),
        kubeplex::members::LeavePolicy::Delete
    );
    // Two sources, or an access-providers file without profiles: refused.
    let both = members_of(&[
        "--members-from-cluster-api",
        "a",
        "--members-from-cluster-profiles",
        "b",
    ]);
    assert_eq!(
        both.unwrap_err().kind(),
        clap::error::ErrorKind::ArgumentConflict
    );
    let alone = members_of(&["--access-providers", "f.json"]);
    assert_eq!(
        alone.unwrap_err().kind(),
        clap::error::ErrorKind::MissingRequiredArgument
    );
    // An access-providers file that cannot be read fails the manager's assembly, saying which file.
    let flags = members_of(&[
        "--members-from-cluster-profiles",
        "b",
        "--access-providers",
        "/nonexistent/access.json",
    ])
    .unwrap();
    let Err(error) = flags.add_to(kubeplex::Manager::new()) else {
        panic!("an unreadable access-providers file was taken");
    };
    assert!(
        error.to_string().contains("/nonexistent/access.json"),
        "{error}"
    );
}

#[test]
fn run_allows_member_exec_commands_and_insecure_members_only_when_asked() {
    let members = members_of(&["--members-from-secrets", "a=b"]).unwrap();
    assert!(members.member_exec_command.is_empty());
    assert!(!members.allow_insecure_members);
    let members = members_of(&[
        "--members-from-cluster-api",
        "capi-system",
        "--member-exec-command",
        "aws",
        "--member-exec-command",
        "/usr/local/bin/kubelogin",
        "--allow-insecure-members",
    ])
    .unwrap();
    assert_eq!(
        members.member_exec_command,
        ["aws", "/usr/local/bin/kubelogin"]
    );
    assert!(members.allow_insecure_members);
    // Without a member source they would allow nothing: refused.
    for args in [
        &["--member-exec-command", "aws"][..],
        &["--allow-insecure-members"],
    ] {
        let refused = members_of(args).unwrap_err();
        assert_eq!(
            refused.kind(),
            clap::error::ErrorKind::MissingRequiredArgument,
            "{args:?}: {refused}"
        );
    }
    let command = Cli::command();
    let run = command.find_subcommand("run").unwrap();
    let env_of = |id: &str| {
        let arg = run.get_arguments().find(|a| a.get_id() == id).unwrap();
        arg.get_env().map(|e| e.to_string_lossy().into_owned())
    };
    assert_eq!(
        env_of("member_exec_command").as_deref(),
        Some("FLEET_MEMBER_EXEC_COMMANDS")
    );
    assert_eq!(
        env_of("allow_insecure_members").as_deref(),
        Some("FLEET_ALLOW_INSECURE_MEMBERS")
    );
}
