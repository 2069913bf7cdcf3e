//! A tool's grants written into the user's policy file, the rest of the file left as the user wrote it
//! (its comments and layout kept, through toml_edit).
//!
//! Accepted grants become the tool's `[tools.NAME]` table (and `[tools.NAME.network]`), replacing what
//! was there. A tool whose grants were not accepted gets `approval = "deny"`, with what it asked for in
//! a comment, unless the user wrote a table for it already: its calls are denied until the user grants
//! something. The result is checked to be a valid policy before it is written.

use toml_edit::{Array, DocumentMut, Item, Table, value};

use super::grants::Grants;
use crate::policy::Policy;

/// Why the policy file could not be changed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the policy file: {0}")]
pub struct PolicyFileError(pub String);

fn parse(text: &str) -> Result<DocumentMut, PolicyFileError> {
    text.parse::<DocumentMut>()
        .map_err(|e| PolicyFileError(e.to_string()))
}

fn array(items: &[String]) -> Item {
    let mut array = Array::new();
    for item in items {
        array.push(item.as_str());
    }
    value(array)
}

fn tools_table(document: &mut DocumentMut) -> Result<&mut Table, PolicyFileError> {
    let tools = document.entry("tools").or_insert_with(|| {
        let mut table = Table::new();
        table.set_implicit(true);
        Item::Table(table)
    });
    tools
        .as_table_mut()
        .ok_or_else(|| PolicyFileError("`tools` is not a table".into()))
}

fn checked(document: DocumentMut) -> Result<String, PolicyFileError> {
    let text = document.to_string();
    Policy::from_toml(&text)
        .map_err(|e| PolicyFileError(format!("the result would not be valid: {e}")))?;
    Ok(text)
}

/// `text` with `tool`'s table replaced by exactly `grants`.
pub fn accept(text: &str, tool: &str, grants: &Grants) -> Result<String, PolicyFileError> {
    let mut document = parse(text)?;
    let mut table = Table::new();
    table.decor_mut().set_prefix(format!(
        "\n# Granted to `{tool}` when its grants were accepted (turngate tools add).\n"
    ));
    let lists = [
        ("read", &grants.paths.read),
        ("write", &grants.paths.write),
        ("secrets", &grants.secrets),
        ("env", &grants.env),
    ];
    for (key, items) in lists {
        if !items.is_empty() {
            table.insert(key, array(items));
        }
    }
    // An explicit table even when empty: a listed tool without one would get the top-level grant.
    let mut network = Table::new();
    if !grants.network.get.is_empty() {
        network.insert("get", array(&grants.network.get));
    }
    if !grants.network.write.is_empty() {
        network.insert("write", array(&grants.network.write));
    }
    table.insert("network", Item::Table(network));
    tools_table(&mut document)?.insert(tool, Item::Table(table));
    checked(document)
}

/// `text` with `tool` denied every call (`approval = "deny"`), what it asked for in a comment, unless
/// the file has a table for it already.
pub fn deny(text: &str, tool: &str, grants: &Grants) -> Result<String, PolicyFileError> {
    let mut document = parse(text)?;
    let tools = tools_table(&mut document)?;
    if tools.contains_key(tool) {
        return checked(document);
    }
    let mut table = Table::new();
    let asked: String = grants
        .describe()
        .lines()
        .map(|line| {
            format!(
                "#   {}\n",
                line.split_whitespace().collect::<Vec<_>>().join(" ")
            )
        })
        .collect();
    table.decor_mut().set_prefix(format!(
        "\n# `{tool}` was installed without its grants: every call is denied until they are granted\n\
         # here (or with `turngate tools add --accept-grants`). It asked for:\n{asked}"
    ));
    table.insert("approval", value("deny"));
    tools.insert(tool, Item::Table(table));
    checked(document)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_are_written_as_the_tools_table_and_the_rest_is_kept() {
        let before = "# my policy\ndefault = \"read-only\"  # keep this\n\n[tools.write_file]\npaths = [\"notes.txt\"]\n";
        let grants = Grants::parse(
            r#"{"paths": {"read": ["docs/**"]}, "network": {"get": ["https://a.test/**"]}, "env": ["LANG"]}"#,
        )
        .unwrap();
        let after = accept(before, "weather", &grants).unwrap();
        assert!(
            after.starts_with("# my policy\ndefault = \"read-only\"  # keep this\n"),
            "{after}"
        );
        let policy = Policy::from_toml(&after).unwrap();
        assert_eq!(policy.env("weather"), ["LANG"]);
        assert!(policy.network("weather").any());
        assert!(
            policy
                .check("weather", "docs/a.md", crate::descriptor::Access::Read)
                .is_allow()
        );
        assert!(
            !policy
                .check("weather", "src/a.rs", crate::descriptor::Access::Read)
                .is_allow()
        );
        // Accepting again replaces the table.
        let narrower = accept(&after, "weather", &Grants::default()).unwrap();
        let policy = Policy::from_toml(&narrower).unwrap();
        assert!(!policy.network("weather").any(), "{narrower}");
        assert!(
            !policy
                .check("weather", "docs/a.md", crate::descriptor::Access::Read)
                .is_allow()
        );
    }

    #[test]
    fn a_tool_whose_grants_were_not_accepted_is_denied_unless_the_user_wrote_its_table() {
        let grants = Grants::parse(r#"{"env": ["HOME"]}"#).unwrap();
        let denied = deny("default = \"workspace-write\"\n", "weather", &grants).unwrap();
        assert!(denied.contains("#   environment HOME"), "{denied}");
        let policy = Policy::from_toml(&denied).unwrap();
        assert!(!policy.check_tool("weather").is_allow());
        let own = "[tools.weather]\nread = [\"x\"]\n";
        assert_eq!(deny(own, "weather", &grants).unwrap(), own);
    }
}
