//! `mneme token`: the api's token, for the dashboard, scripts and MCP clients over HTTP; and
//! `mneme token rotate`, a new one in the token file, which a running api takes within a second.
//!
//! The token goes to stdout alone, so `$(mneme token)` is the token; where it came from goes to
//! stderr. `MNEME_API_TOKEN` wins over the file, as it does for the api.

use common::CommonArgs;

#[derive(Debug, clap::Args)]
pub struct TokenArgs {
    #[command(subcommand)]
    command: Option<TokenCommand>,

    #[command(flatten)]
    common: CommonArgs,

    /// The api's token setting: when set, it is the token in use and the file is not.
    #[arg(
        long = "api-token",
        env = "MNEME_API_TOKEN",
        hide_env_values = true,
        hide = true
    )]
    token: Option<String>,
}

#[derive(Debug, clap::Subcommand)]
enum TokenCommand {
    /// Replace the token file's token with a new one; a running api refuses the old one within
    /// a second (refused while MNEME_API_TOKEN is set, since that wins over the file).
    Rotate,
}

pub fn run(args: TokenArgs) -> anyhow::Result<()> {
    // The same setting the api reads, through the same rules (trimmed, empty meaning unset).
    let setting = api::ApiArgs {
        token: args.token,
        ..Default::default()
    };
    let path = args.common.api_token_path();
    match args.command {
        None => {
            if let Some(token) = setting.setting_token() {
                setting.check()?;
                println!("{token}");
                eprintln!(
                    "from MNEME_API_TOKEN (it wins over the token file {})",
                    path.display()
                );
                return Ok(());
            }
            let (token, generated) = api::security::load_or_create(&path)?;
            println!("{token}");
            if generated {
                eprintln!(
                    "generated now into {} (readable by you only); the api uses it when it starts",
                    path.display()
                );
            } else {
                eprintln!("from {}", path.display());
            }
            Ok(())
        }
        Some(TokenCommand::Rotate) => {
            if setting.setting_token().is_some() {
                anyhow::bail!(
                    "MNEME_API_TOKEN is set, and it wins over the token file {}: a new token there would not be used; change MNEME_API_TOKEN itself, or unset it to use the file",
                    path.display()
                );
            }
            let token = api::security::rotate_token_file(&path)?;
            println!("{token}");
            eprintln!(
                "a new token is in {}; a running api refuses the old one within a second, and the dashboard asks for the new one",
                path.display()
            );
            Ok(())
        }
    }
}
