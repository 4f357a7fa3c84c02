//! The `smbgate` binary.

use clap::{CommandFactory, FromArgMatches};
use smbgate::config::{Cli, Command, ConfigCommand};
use tracing::level_filters::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

fn main() {
    let cli = parse_cli();
    if let Command::Config(ConfigCommand::Check { file, without_secrets }) = &cli.command {
        if *without_secrets {
            smbgate::secret_files::leave_secret_files_unread();
        }
        match smbgate::config_check::check(Cli::command(), file) {
            Ok(report) => {
                print!("{report}");
                std::process::exit(0)
            }
            Err(e) => {
                eprintln!("smbgate: {e}");
                std::process::exit(1)
            }
        }
    }
    // The log on stderr never carries access-log lines (its filter turns
    // their target off); those go, as JSON, to `--access-log` only.
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(log_filter(std::env::var("SMBGATE_LOG").ok().as_deref()));
    let access_log = match &cli.command {
        Command::Serve(args) => args.access_log.clone(),
        Command::Config(_) => None,
    };
    let access_file = match access_log.as_deref().map(open_access_log) {
        None => None,
        Some(Ok(f)) => Some(f),
        Some(Err(e)) => {
            eprintln!("smbgate: --access-log: {e}");
            std::process::exit(1);
        }
    };
    let access = access_file.clone().map(|f| {
        tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .with_writer(f)
            .with_filter(
                tracing_subscriber::filter::Targets::new()
                    .with_target(smbgate::access_line::ACCESS_TARGET, tracing::Level::INFO),
            )
    });
    let (traces, exporter) = match &cli.command {
        Command::Serve(args) => {
            match args.otlp_endpoint.as_deref().map(|e| smbgate::traces::layer(e, args.otlp_sample_ratio)) {
                None => (None, None),
                Some(Ok((layer, exporter))) => (Some(layer), Some(exporter)),
                Some(Err(e)) => {
                    eprintln!("smbgate: {e}");
                    std::process::exit(1);
                }
            }
        }
        Command::Config(_) => (None, None),
    };
    // The layers there are, and no absent one: an absent layer (`None`)
    // makes every callsite worth asking about, and a span that the stderr
    // filter then refuses leaves its per-layer "disabled" mark behind, which
    // swallowed the next event a per-target directive (`SMBGATE_LOG=warn,
    // smbgate::store::sweep=debug`) enables on that thread.
    let mut layers: Vec<Box<dyn Layer<tracing_subscriber::Registry> + Send + Sync>> = vec![stderr.boxed()];
    layers.extend(access.map(Layer::boxed));
    layers.extend(traces);
    tracing_subscriber::registry().with(layers).init();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let code = rt.block_on(async {
        match cli.command {
            Command::Serve(args) => match smbgate::server::prepare(&args).await {
                Ok(mut p) => {
                    if let Some(AccessLog::File(f)) = &access_file {
                        p.reopen_on_sighup(f.clone());
                    }
                    // Once up, so that a startup failure stays one line.
                    if smbgate::config::password_on_command_line(std::env::args()) {
                        tracing::warn!(
                            "--smb-password on the command line is visible to every user of this machine (ps); \
                             use --smb-password-file or SMBGATE_SMB_PASSWORD instead"
                        );
                    }
                    let scheme = if p.is_tls() { "https" } else { "http" };
                    match (p.local_addr(), p.plain_addr()) {
                        (Ok(a), Some(plain)) => tracing::info!(
                            listen = %format_args!("{scheme}://{a}"), listen_plain = %format_args!("http://{plain}"),
                            share = %args.share, "smbgate ready"
                        ),
                        (Ok(a), None) => {
                            tracing::info!(listen = %format_args!("{scheme}://{a}"), share = %args.share, "smbgate ready")
                        }
                        (Err(_), _) => tracing::info!("smbgate ready"),
                    }
                    if let Some(a) = p.metrics_addr() {
                        tracing::info!(listen = %format_args!("http://{a}"), "metrics at /metrics, health at /health/live and /health/ready");
                    }
                    smbgate::server::run(p, smbgate::server::shutdown_signal()).await;
                    0
                }
                Err(e) => {
                    eprintln!("smbgate: {e}");
                    1
                }
            },
            Command::Config(_) => 0,
        }
    });
    // Outside `block_on`: the exporter's last send blocks this thread.
    if let Some(e) = exporter {
        e.shutdown();
    }
    std::process::exit(code);
}

/// The command line, with the config file's settings (`--config` or
/// `SMBGATE_CONFIG`) as the flags' defaults. A file that does not load or
/// names an unknown setting is one line and exit status 1.
fn parse_cli() -> Cli {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let serving = args.get(1).is_some_and(|a| a == "serve");
    let cmd = Cli::command();
    let matches = match smbgate::config_file::path_from(&args).filter(|_| serving) {
        None => cmd.get_matches_from(args),
        Some(path) => match smbgate::config_file::ConfigFile::load(&path).map(|f| f.parse(&cmd, args)) {
            Ok(Ok(m)) => m,
            Ok(Err(smbgate::config_file::ParseError::Clap(e))) => e.exit(),
            Ok(Err(smbgate::config_file::ParseError::File(e))) | Err(e) => {
                eprintln!("smbgate: {e}");
                std::process::exit(1);
            }
        },
    };
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if let (Command::Serve(serve), Some(m)) = (&mut cli.command, matches.subcommand_matches("serve")) {
        if let Err(e) = smbgate::config_file::resolve_secret_pairs(m, serve) {
            eprintln!("smbgate: {e}");
            std::process::exit(2);
        }
    }
    cli
}

/// The log filter: `SMBGATE_LOG` (default `info`), with s3s's own log off
/// unless the setting names s3s. s3s logs every client error at ERROR; the
/// front logs each answer once instead (`SMBGATE_LOG=info,s3s=debug` brings
/// s3s's back).
///
/// Whatever the setting says, the s3s modules that see credentials log at
/// INFO at most ([`SECRET_TARGETS`]): at DEBUG and TRACE they write whole
/// requests (the Authorization header, a presigned URL's signature), form
/// fields, chunk signatures, and the signature computed for a request
/// whose own does not match, which anyone reading the log could then send.
/// A directive the setting gives those modules is dropped, so these hold.
fn log_filter(setting: Option<&str>) -> EnvFilter {
    let s = setting.map(str::trim).filter(|s| !s.is_empty()).unwrap_or("info");
    let s = if s.contains("s3s") { s.to_string() } else { format!("{s},s3s=off") };
    let s: Vec<&str> = s.split(',').filter(|d| !SECRET_TARGETS.iter().any(|t| d.trim().starts_with(t))).collect();
    let access = smbgate::access_line::ACCESS_TARGET;
    let clamps: String =
        SECRET_TARGETS.iter().map(|t| format!(",{t}={}", level_for(&s, t).min(LevelFilter::INFO))).collect();
    let s = s.join(",");
    EnvFilter::try_new(format!("{s},{access}=off{clamps}"))
        .unwrap_or_else(|_| EnvFilter::new(format!("info,s3s=off,{access}=off")))
}

/// The level `directives` give events of `target`: the longest target
/// directive that is a module prefix of it, else the bare level, else OFF.
/// Span and field directives are not considered (none name s3s's modules).
fn level_for(directives: &[&str], target: &str) -> LevelFilter {
    let mut best: Option<(usize, LevelFilter)> = None;
    let mut bare = LevelFilter::OFF;
    for d in directives.iter().map(|d| d.trim()) {
        match d.split_once('=') {
            None => bare = d.parse().unwrap_or(bare),
            Some((t, level)) => {
                let covers = target == t || target.strip_prefix(t).is_some_and(|rest| rest.starts_with("::"));
                if covers && best.is_none_or(|(len, _)| t.len() >= len) {
                    if let Ok(l) = level.parse() {
                        best = Some((t.len(), l));
                    }
                }
            }
        }
    }
    best.map_or(bare, |(_, l)| l)
}

/// The s3s modules whose DEBUG and TRACE events carry credentials (see
/// [`log_filter`]): `service` logs each request whole; `ops` the POST form
/// fields, and its `signature` module string-to-sign and signatures;
/// `aws_chunked_stream` each chunk's signature.
const SECRET_TARGETS: [&str; 3] = ["s3s::service", "s3s::ops", "s3s::http::aws_chunked_stream"];

#[cfg(test)]
mod tests {
    use tracing::level_filters::LevelFilter;

    #[test]
    fn no_setting_brings_the_modules_that_see_credentials_below_info() {
        for setting in ["s3s=trace", "trace", "s3s::ops::signature=debug,s3s::service=trace", "s3s::ops=trace,debug"] {
            let f = super::log_filter(Some(setting)).to_string();
            for t in super::SECRET_TARGETS {
                assert!(f.contains(&format!("{t}=info")) || f.contains(&format!("{t}=off")), "{setting}: {f}");
                assert!(!f.contains(&format!("{t}=debug")) && !f.contains(&format!("{t}=trace")), "{setting}: {f}");
            }
        }
        assert_eq!(super::log_filter(Some("s3s=debug")).max_level_hint(), Some(LevelFilter::DEBUG));
    }

    #[test]
    fn the_clamp_never_raises_a_level_the_setting_gave() {
        // s3s is off unless named; a clamp at INFO would bring its ERRORs back.
        for (setting, want) in [
            ("info", "off"),
            ("debug", "off"),
            ("s3s=warn", "warn"),
            ("s3s=trace", "info"),
            ("error,s3s::ops=trace", "error"),
        ] {
            let f = super::log_filter(Some(setting)).to_string();
            assert!(f.contains(&format!("s3s::service={want}")), "{setting}: {f}");
        }
        let f = super::log_filter(Some("s3s=error")).to_string();
        assert!(f.contains("s3s::ops=error") && f.contains("s3s::http::aws_chunked_stream=error"), "{f}");
    }
}

/// Where access-log lines go: standard output (`-`), or a file opened for
/// appending and reopened on SIGHUP.
#[derive(Clone)]
enum AccessLog {
    Stdout,
    File(smbgate::access_log::AccessLogFile),
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for AccessLog {
    type Writer = Box<dyn std::io::Write + 'a>;

    fn make_writer(&'a self) -> Self::Writer {
        match self {
            AccessLog::Stdout => Box::new(std::io::stdout()),
            AccessLog::File(f) => Box::new(f.make_writer()),
        }
    }
}

/// The access log at `path` (`-` for standard output).
///
/// Errors: the file cannot be opened (the message names it).
fn open_access_log(path: &std::path::Path) -> Result<AccessLog, String> {
    if path.as_os_str() == "-" {
        return Ok(AccessLog::Stdout);
    }
    smbgate::access_log::AccessLogFile::open(path).map(AccessLog::File)
}
