//! Composing WGSL: each shader file names the files it uses in `#import` lines
//! at its top (`#import lib/stack.wgsl`), and its structure constants as
//! `{NAME}` placeholders. [`compose`] puts every imported file in once, before
//! the first file that imports it, fills the placeholders, and fails loudly on
//! an unknown import, an import cycle, a placeholder left unfilled, or a value
//! that no file asks for (a misspelt name).

/// Every shader file, by the name `#import` lines use. Shared pieces live in
/// `lib/`; the others are kernels with their entry points.
const FILES: [(&str, &str); 13] = [
    ("lib/scalar.wgsl", include_str!("shaders/lib/scalar.wgsl")),
    ("lib/stack.wgsl", include_str!("shaders/lib/stack.wgsl")),
    ("lib/gelu.wgsl", include_str!("shaders/lib/gelu.wgsl")),
    ("lib/energy.wgsl", include_str!("shaders/lib/energy.wgsl")),
    ("adam.wgsl", include_str!("shaders/adam.wgsl")),
    ("batch_sum.wgsl", include_str!("shaders/batch_sum.wgsl")),
    ("column_sum.wgsl", include_str!("shaders/column_sum.wgsl")),
    (
        "coupling_layer.wgsl",
        include_str!("shaders/coupling_layer.wgsl"),
    ),
    (
        "lattice_layer.wgsl",
        include_str!("shaders/lattice_layer.wgsl"),
    ),
    ("heatmap.wgsl", include_str!("shaders/heatmap.wgsl")),
    ("overlay.wgsl", include_str!("shaders/overlay.wgsl")),
    ("radial_flow.wgsl", include_str!("shaders/radial_flow.wgsl")),
    ("scalar_eval.wgsl", include_str!("shaders/scalar_eval.wgsl")),
];

/// Why a shader could not be composed: a mistake in the shaders or in the
/// code that specializes them, never in the user's input.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ShaderError {
    #[error("{file} imports {import}, which is not a shader file")]
    UnknownImport { file: String, import: String },
    #[error("shader files import each other in a cycle: {0}")]
    ImportCycle(String),
    #[error("{file} leaves the placeholder {{{name}}} unfilled")]
    Unfilled { file: String, name: String },
    #[error("the value {name} fills no placeholder of {root} or its imports")]
    UnusedValue { root: String, name: String },
}

/// A structure constant for a shader's `{NAME}` placeholder.
pub type Value = (&'static str, String);

/// The text of shader file `name`.
fn file(name: &str) -> Option<&'static str> {
    FILES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| *text)
}

/// The files `text` imports, and its text without the `#import` lines.
fn split_imports(text: &str) -> (Vec<&str>, String) {
    let mut imports = Vec::new();
    let mut body = String::with_capacity(text.len());
    for line in text.lines() {
        match line.trim().strip_prefix("#import ") {
            Some(import) => imports.push(import.trim()),
            None => {
                body.push_str(line);
                body.push('\n');
            }
        }
    }
    (imports, body)
}

/// The WGSL of shader file `root` with its imports, each once, and its
/// placeholders filled from `values`.
pub fn compose(root: &str, values: &[Value]) -> Result<String, ShaderError> {
    let mut order = Vec::new();
    visit(root, "the caller", &mut Vec::new(), &mut order)?;
    let mut used = vec![false; values.len()];
    let mut source = String::new();
    for (name, body) in order {
        let filled = fill(&body, values, &mut used);
        if let Some(left) = placeholder_in(&filled) {
            return Err(ShaderError::Unfilled {
                file: name.to_string(),
                name: left.to_string(),
            });
        }
        source.push_str(&format!("// ---- {name}\n"));
        source.push_str(&filled);
    }
    if let Some(k) = used.iter().position(|u| !u) {
        return Err(ShaderError::UnusedValue {
            root: root.to_string(),
            name: values[k].0.to_string(),
        });
    }
    Ok(source)
}

/// Appends `name`'s imports (depth first), then `name`, to `order`, once each.
fn visit(
    name: &str,
    importer: &str,
    path: &mut Vec<String>,
    order: &mut Vec<(String, String)>,
) -> Result<(), ShaderError> {
    if order.iter().any(|(done, _)| done == name) {
        return Ok(());
    }
    if path.iter().any(|p| p == name) {
        path.push(name.to_string());
        return Err(ShaderError::ImportCycle(path.join(" -> ")));
    }
    let text = file(name).ok_or_else(|| ShaderError::UnknownImport {
        file: importer.to_string(),
        import: name.to_string(),
    })?;
    let (imports, body) = split_imports(text);
    path.push(name.to_string());
    for import in imports {
        visit(import, name, path, order)?;
    }
    path.pop();
    order.push((name.to_string(), body));
    Ok(())
}

/// `body` with every `{NAME}` of `values` filled; marks the values used.
fn fill(body: &str, values: &[Value], used: &mut [bool]) -> String {
    let mut filled = body.to_string();
    for (k, (name, value)) in values.iter().enumerate() {
        let placeholder = format!("{{{name}}}");
        if filled.contains(&placeholder) {
            filled = filled.replace(&placeholder, value);
            used[k] = true;
        }
    }
    filled
}

/// The first `{NAME}` placeholder left in `text` (upper case, digits and `_`).
fn placeholder_in(text: &str) -> Option<&str> {
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(after.len());
        if name_len > 0
            && after[name_len..].starts_with('}')
            && after.starts_with(|c: char| c.is_ascii_uppercase())
        {
            return Some(&after[..name_len]);
        }
        rest = after;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_composes_with_its_imports_once_and_before_their_users() {
        let source = compose("lattice_layer.wgsl", &lattice_values()).unwrap();
        let at = |name: &str| source.find(&format!("// ---- {name}\n")).unwrap();
        assert!(at("lib/scalar.wgsl") < at("lib/stack.wgsl"));
        assert!(at("lib/stack.wgsl") < at("lattice_layer.wgsl"));
        assert_eq!(source.matches("// ---- lib/scalar.wgsl").count(), 1);
        assert!(!source.contains("#import"));
    }

    #[test]
    fn mistakes_are_named() {
        assert_eq!(
            compose("nothing.wgsl", &[]),
            Err(ShaderError::UnknownImport {
                file: "the caller".into(),
                import: "nothing.wgsl".into()
            })
        );
        // stack.wgsl's constants missing
        assert!(matches!(
            compose("scalar_eval.wgsl", &[]),
            Err(ShaderError::Unfilled { file, .. }) if file == "lib/stack.wgsl"
        ));
        let mut values = lattice_values();
        values.push(("MISSPELT", "1".into()));
        assert_eq!(
            compose("lattice_layer.wgsl", &values),
            Err(ShaderError::UnusedValue {
                root: "lattice_layer.wgsl".into(),
                name: "MISSPELT".into()
            })
        );
    }

    #[test]
    fn placeholders_are_told_from_wgsl_blocks() {
        assert_eq!(placeholder_in("fn f() { return {K}u; }"), Some("K"));
        assert_eq!(placeholder_in("if (a) {X = 1;}"), None);
        assert_eq!(placeholder_in("{SPLINE_BOUND}"), Some("SPLINE_BOUND"));
        assert_eq!(placeholder_in("{ }"), None);
    }

    #[test]
    fn the_import_lines_are_read_from_the_top() {
        let (imports, body) =
            split_imports("// a\n#import lib/a.wgsl\n#import b.wgsl\nfn f() {}\n");
        assert_eq!(imports, ["lib/a.wgsl", "b.wgsl"]);
        assert_eq!(body, "// a\nfn f() {}\n");
    }

    fn lattice_values() -> Vec<Value> {
        let stack = crate::bijection::Stack::uniform(crate::bijection::Family::Sinh, 1);
        let mut values = super::super::specialize::stack_values(&stack).unwrap();
        values.extend([
            ("COPIES", "1".to_string()),
            ("W", "8".to_string()),
            ("DEPTH", "1".to_string()),
            ("M2", "-4.0".to_string()),
            ("LAMBDA", "8.0".to_string()),
            ("ODD", "0u, 0u, 0u, 0u, 0u".to_string()),
        ]);
        values
    }
}
