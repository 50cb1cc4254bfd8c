//! CSCS Container Engine environment definition files (EDFs): where a step's
//! `--environment` name resolves, whether the EDF is well formed, and whether
//! its image exists, checked before anything is launched.
//!
//! A name with a `/` is a path; otherwise the Container Engine looks for
//! `<name>.toml` in the directories of `EDF_PATH`, then in `~/.edf`. Values
//! may use `${VAR}` and `${VAR:-default}`, expanded from the environment (an
//! unset variable without a default is an error, as it is for the engine).
//! An image that is a file (`.sqsh`, or a path) must exist; a registry
//! reference (`[USER@][REGISTRY#]IMAGE[:TAG]`) is pulled by the engine and
//! cannot be checked here.
//!
//! The engine itself expands variables only as a technical preview, on one
//! vCluster: the EDFs a campaign's steps use are rendered into the run
//! directory with every variable expanded here, and the steps name those
//! files ([`render_plan`]). The EDFs in `containers/edf/` are templates.

use std::path::{Path, PathBuf};

use toml::Value;

use hpcagent_common::config::{Config, ConfigError};
use hpcagent_common::plan::{Plan, Role};

/// Why an EDF cannot be found or rendered.
#[derive(Debug, thiserror::Error)]
pub enum EdfError {
    #[error("the EDF {0} does not exist")]
    NoSuchFile(String),
    #[error(
        "no EDF named {name} in EDF_PATH or ~/.edf (looked in {looked}); copy \
         containers/edf/{name}.toml there, or give the EDF's path"
    )]
    NotFound { name: String, looked: String },
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}: {error}")]
    Toml {
        path: PathBuf,
        error: toml::de::Error,
    },
    #[error("EDF {name} ({path}): {error}")]
    Expand {
        name: String,
        path: PathBuf,
        error: VarError,
    },
    #[error(transparent)]
    Render(#[from] toml::ser::Error),
}

/// Why a string's `${…}` cannot be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VarError {
    #[error("{0:?}: an unclosed ${{")]
    Unclosed(String),
    #[error("{text:?}: ${{{body}}} is not ${{NAME}} or ${{NAME:-default}}")]
    NotAVariable { text: String, body: String },
    #[error("${{{0}}} is not set")]
    Unset(String),
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> EdfError + '_ {
    move |error| EdfError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// Where `name` resolves, or why it does not.
pub fn resolve(name: &str, var: &dyn Fn(&str) -> Option<String>) -> Result<PathBuf, EdfError> {
    if name.contains('/') {
        let path = PathBuf::from(name);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(EdfError::NoSuchFile(name.to_string()))
        };
    }
    let mut dirs: Vec<PathBuf> = var("EDF_PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .collect();
    if let Some(home) = var("HOME") {
        dirs.push(Path::new(&home).join(".edf"));
    }
    dirs.iter()
        .map(|d| d.join(format!("{name}.toml")))
        .find(|p| p.is_file())
        .ok_or_else(|| EdfError::NotFound {
            name: name.to_string(),
            looked: dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Checks every EDF the plan's steps name, as config problems at the key
/// that names it.
pub fn check_plan(config: &Config, plan: &Plan) -> Result<(), ConfigError> {
    let var = |name: &str| std::env::var(name).ok();
    let mut seen = Vec::new();
    let mut errors = Vec::new();
    for instance in &plan.instances {
        let Some(name) = &instance.edf else { continue };
        if seen.contains(name) {
            continue;
        }
        seen.push(name.clone());
        let key = match instance.role {
            Role::Inference => "INFERENCE_CE_ENV",
            Role::Agent | Role::Judge => "ROLE_CE_ENV",
        };
        if let Err(problems) = check(name, &var, &needed_paths(plan, instance.role)) {
            errors.extend(problems.into_iter().map(|p| config.diagnostic(key, p)));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ConfigError(errors))
    }
}

/// What a role's step reads from the host, by what it is: every step its
/// run directory, agents and judges the corpus and the skills pages.
fn needed_paths(plan: &Plan, role: Role) -> Vec<(&'static str, &Path)> {
    let mut paths = vec![("the run directory", plan.run_dir.as_path())];
    if role != Role::Inference {
        paths.push(("the corpus", plan.corpus.as_path()));
        paths.push(("the skills pages", plan.skills.as_path()));
    }
    paths.retain(|(_, p)| !p.as_os_str().is_empty());
    paths
}

/// What of `needed` no mount of `edf` holds (where it has the same path
/// inside): a step that cannot see them would fail in the job, after its
/// wait in the queue. CSCS advises against mounting `$HOME`, so a checkout
/// there is the usual cause.
fn unmounted(
    edf: &Value,
    var: &dyn Fn(&str) -> Option<String>,
    needed: &[(&str, &Path)],
) -> Vec<String> {
    let inside: Vec<PathBuf> = edf
        .get("mounts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter_map(|m| expand(m, var).ok())
        .filter_map(|m| {
            let mut parts = m.split(':');
            let source = parts.next()?.to_string();
            let target = parts.next().unwrap_or(&source).to_string();
            (source == target).then(|| PathBuf::from(target))
        })
        .collect();
    let seen = |p: &Path| {
        let real = p.canonicalize().ok();
        inside.iter().any(|m| {
            p.starts_with(m)
                || real.as_ref().is_some_and(|r| {
                    r.starts_with(m) || m.canonicalize().is_ok_and(|m| r.starts_with(m))
                })
        })
    };
    needed
        .iter()
        .filter(|(_, p)| !seen(p))
        .map(|(what, p)| {
            format!(
                "mounts no directory holding {what} ({}); its steps could not read it: keep \
                 it under a mounted directory ($SCRATCH), or mount it",
                p.display()
            )
        })
        .collect()
}

/// Renders every EDF the plan's steps name into `dir` (`<stem>.toml`, every
/// `${…}` expanded from this process's environment) and points the steps
/// at the rendered files; problems as config problems at the key that
/// names the EDF.
pub fn render_plan(config: &Config, plan: &mut Plan, dir: &Path) -> Result<(), ConfigError> {
    check_plan(config, plan)?;
    let var = |name: &str| std::env::var(name).ok();
    let mut rendered: Vec<(String, PathBuf)> = Vec::new();
    let mut errors = Vec::new();
    for instance in &mut plan.instances {
        let Some(name) = instance.edf.clone() else {
            continue;
        };
        if let Some((_, path)) = rendered.iter().find(|(n, _)| *n == name) {
            instance.edf = Some(path.display().to_string());
            continue;
        }
        let key = match instance.role {
            Role::Inference => "INFERENCE_CE_ENV",
            Role::Agent | Role::Judge => "ROLE_CE_ENV",
        };
        match render(&name, &var, dir) {
            Ok(path) => {
                instance.edf = Some(path.display().to_string());
                rendered.push((name, path));
            }
            Err(problem) => errors.push(config.diagnostic(key, problem.to_string())),
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ConfigError(errors))
    }
}

/// Writes the EDF `name` resolves to into `dir` with its variables
/// expanded; its path (absolute when `dir` is).
pub fn render(
    name: &str,
    var: &dyn Fn(&str) -> Option<String>,
    dir: &Path,
) -> Result<PathBuf, EdfError> {
    let source = resolve(name, var)?;
    let text = std::fs::read_to_string(&source).map_err(io_at(&source))?;
    let mut edf = parse(&text).map_err(|error| EdfError::Toml {
        path: source.clone(),
        error,
    })?;
    expand_all(&mut edf, var).map_err(|error| EdfError::Expand {
        name: name.to_string(),
        path: source.clone(),
        error,
    })?;
    let stem = source
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "edf".into());
    std::fs::create_dir_all(dir).map_err(io_at(dir))?;
    let to = dir.join(format!("{stem}.toml"));
    let body = toml::to_string(&edf)?;
    let header = format!(
        "# Rendered by hpcagent from {}, its variables expanded.\n",
        source.display()
    );
    std::fs::write(&to, header + &body).map_err(io_at(&to))?;
    Ok(to)
}

/// Every string of `value` (not its keys) with its variables expanded.
fn expand_all(value: &mut Value, var: &dyn Fn(&str) -> Option<String>) -> Result<(), VarError> {
    match value {
        Value::String(s) => *s = expand(s, var)?,
        Value::Array(items) => {
            for item in items {
                expand_all(item, var)?;
            }
        }
        Value::Table(t) => {
            for (_, v) in t.iter_mut() {
                expand_all(v, var)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Resolves `name`, validates its EDF, checks its image and that it mounts
/// the host's paths its steps read (`needed`): every problem.
pub fn check(
    name: &str,
    var: &dyn Fn(&str) -> Option<String>,
    needed: &[(&str, &Path)],
) -> Result<(), Vec<String>> {
    let path = resolve(name, var).map_err(|e| vec![e.to_string()])?;
    let text =
        std::fs::read_to_string(&path).map_err(|e| vec![format!("{}: {e}", path.display())])?;
    let mut problems = validate(&text);
    if problems.is_empty() {
        let edf = parse(&text).expect("validated");
        if let Some(image) = edf.get("image").and_then(Value::as_str) {
            match expand(image, var) {
                Ok(image) if is_file_image(&image) && !Path::new(&image).is_file() => problems.push(
                    format!("its image {image} does not exist (build and import it: containers/README.md)"),
                ),
                Ok(_) => {}
                Err(e) => problems.push(format!("image: {e}")),
            }
        }
        problems.extend(unmounted(&edf, var, needed));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems
            .into_iter()
            .map(|p| format!("EDF {name} ({}): {p}", path.display()))
            .collect())
    }
}

/// What is wrong with an EDF's text, as the Container Engine reads it.
pub fn validate(text: &str) -> Vec<String> {
    let edf = match parse(text) {
        Ok(v) => v,
        Err(e) => return vec![format!("not TOML: {e}")],
    };
    let mut problems = Vec::new();
    if edf.get("image").is_none() && edf.get("base_environment").is_none() {
        problems.push("needs an `image` (or a `base_environment` that gives one)".into());
    }
    for key in ["image", "workdir", "entrypoint"] {
        if let Some(v) = edf.get(key)
            && !v.is_str()
        {
            problems.push(format!("`{key}` must be a string"));
        }
    }
    if let Some(v) = edf.get("writable")
        && !v.is_bool()
    {
        problems.push("`writable` must be true or false".into());
    }
    match edf.get("mounts") {
        None => {}
        Some(Value::Array(mounts)) => {
            for m in mounts {
                match m.as_str() {
                    Some(m) => problems.extend(mount_problem(m)),
                    None => problems.push("`mounts` holds only strings".into()),
                }
            }
        }
        Some(_) => problems.push("`mounts` must be a list of \"SRC:DST[:FLAGS]\"".into()),
    }
    for table in ["env", "annotations"] {
        if let Some(t) = edf.get(table) {
            match t.as_table() {
                Some(t) => check_strings(table, t, &mut problems),
                None => problems.push(format!("`[{table}]` must be a table")),
            }
        }
    }
    problems.extend(driver_capabilities_problem(&edf));
    check_variables(&edf, &mut problems);
    problems
}

/// What enroot's NVIDIA hook accepts in `NVIDIA_DRIVER_CAPABILITIES`: it
/// stops the container on any other word, so every step would fail.
/// Profiling needs no capability here: counter access is the host driver's
/// setting (`NVreg_RestrictProfilingToAdminUsers`).
const DRIVER_CAPABILITIES: [&str; 7] = [
    "all", "compute", "compat32", "display", "graphics", "utility", "video",
];

fn driver_capabilities_problem(edf: &Value) -> Option<String> {
    let value = edf
        .get("env")?
        .get("NVIDIA_DRIVER_CAPABILITIES")?
        .as_str()?;
    let unknown: Vec<&str> = value
        .split(',')
        .map(str::trim)
        .filter(|c| !DRIVER_CAPABILITIES.contains(c))
        .collect();
    (!unknown.is_empty()).then(|| {
        format!(
            "`[env] NVIDIA_DRIVER_CAPABILITIES` has {}, which enroot's NVIDIA hook refuses \
             (it knows {})",
            unknown.join(", "),
            DRIVER_CAPABILITIES.join(", ")
        )
    })
}

/// An EDF document as one table value.
fn parse(text: &str) -> Result<Value, toml::de::Error> {
    toml::from_str::<toml::Table>(text).map(Value::Table)
}

fn mount_problem(mount: &str) -> Option<String> {
    let parts: Vec<&str> = mount.split(':').collect();
    let ok = (2..=3).contains(&parts.len())
        && !parts[0].is_empty()
        && (parts[1].starts_with('/') || parts[1].starts_with("${"));
    (!ok).then(|| format!("mount {mount:?} is not SRC:DST[:FLAGS] with an absolute DST"))
}

/// `[env]` and `[annotations]` values are strings (annotations may be dotted keys).
fn check_strings(table: &str, t: &toml::Table, problems: &mut Vec<String>) {
    for (key, value) in t {
        match value {
            Value::String(_) => {}
            Value::Table(inner) if table == "annotations" => check_strings(table, inner, problems),
            _ => problems.push(format!("`[{table}] {key}` must be a string (quote it)")),
        }
    }
}

/// Every `${…}` is `${NAME}` or `${NAME:-default}`.
fn check_variables(value: &Value, problems: &mut Vec<String>) {
    match value {
        Value::String(s) => {
            if let Err(e) = expand(s, &|_| Some(String::new())) {
                problems.push(e.to_string());
            }
        }
        Value::Array(items) => items.iter().for_each(|v| check_variables(v, problems)),
        Value::Table(t) => t.values().for_each(|v| check_variables(v, problems)),
        _ => {}
    }
}

/// `text` with `${NAME}` and `${NAME:-default}` replaced.
fn expand(text: &str, var: &dyn Fn(&str) -> Option<String>) -> Result<String, VarError> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let body_and_more = &rest[start + 2..];
        let end = body_and_more
            .find('}')
            .ok_or_else(|| VarError::Unclosed(text.to_string()))?;
        let body = &body_and_more[..end];
        let (name, default) = match body.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (body, None),
        };
        let valid = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        if !valid {
            return Err(VarError::NotAVariable {
                text: text.to_string(),
                body: body.to_string(),
            });
        }
        match (
            var(name).filter(|v| !v.is_empty() || default.is_none()),
            default,
        ) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => return Err(VarError::Unset(name.to_string())),
        }
        rest = &body_and_more[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// An image the engine reads from a file rather than pulls.
fn is_file_image(image: &str) -> bool {
    image.starts_with('/') || image.starts_with('.') || image.ends_with(".sqsh")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_edf_in_the_repository_is_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../containers/edf");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            seen += 1;
            let problems = validate(&std::fs::read_to_string(&path).unwrap());
            assert!(problems.is_empty(), "{}: {problems:?}", path.display());
        }
        // The site profiles name four: a vLLM and a roles image per site.
        assert_eq!(seen, 4);
    }

    #[test]
    fn every_edf_the_project_ships_renders_without_a_variable_left() {
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../containers/edf");
        let out = tempfile::tempdir().unwrap();
        let shipped_dir = shipped.display().to_string();
        let var = move |name: &str| match name {
            "EDF_PATH" => Some(shipped_dir.clone()),
            "SCRATCH" => Some("/capstor/scratch/cscs/me".into()),
            "HOME" => Some("/users/me".into()),
            _ => None,
        };
        for name in [
            "hpcagent-roles-gh200",
            "hpcagent-roles-mi300a",
            "hpcagent-vllm-gh200",
            "hpcagent-vllm-mi300a",
        ] {
            let path = render(name, &var, out.path()).unwrap();
            assert_eq!(path, out.path().join(format!("{name}.toml")));
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(!text.contains("${"), "{name}: {text}");
            // CSCS advises against mounting $HOME in an EDF.
            assert!(!text.contains("/users/me"), "{name} mounts $HOME: {text}");
            assert!(validate(&text).is_empty(), "{name}: {text}");
            let edf = parse(&text).unwrap();
            let image = edf["image"].as_str().unwrap();
            assert_eq!(
                image,
                format!("/capstor/scratch/cscs/me/hpcagent/images/{name}.sqsh")
            );
            assert!(
                edf["mounts"].as_array().unwrap().iter().any(
                    |m| m.as_str() == Some("/capstor/scratch/cscs/me:/capstor/scratch/cscs/me")
                ),
                "{text}"
            );
        }
        let unset = render(
            "hpcagent-roles-gh200",
            &|n| (n == "EDF_PATH").then(|| shipped.display().to_string()),
            out.path(),
        )
        .unwrap_err()
        .to_string();
        assert!(unset.contains("${SCRATCH} is not set"), "{unset}");
    }

    #[test]
    fn malformed_edfs_are_refused_with_the_reason() {
        let problems = validate(
            "mounts = [\"/scratch\"]\nwritable = \"yes\"\nworkdir = \"${1BAD}\"\n[env]\nN = 4\n\
             NVIDIA_DRIVER_CAPABILITIES = \"compute,utility,profiler\"\n",
        );
        let text = problems.join("\n");
        assert!(text.contains("needs an `image`"), "{text}");
        assert!(text.contains("not SRC:DST"), "{text}");
        assert!(text.contains("`writable` must be true or false"), "{text}");
        assert!(text.contains("`[env] N` must be a string"), "{text}");
        assert!(
            text.contains("NVIDIA_DRIVER_CAPABILITIES` has profiler, which enroot"),
            "{text}"
        );
        assert!(text.contains("is not ${NAME}"), "{text}");
        assert!(validate("image = [").join("").contains("not TOML"));
    }

    #[test]
    fn names_resolve_through_edf_path_and_images_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("roles.sqsh");
        let edf = "image = \"${IMAGES}/roles.sqsh\"\nmounts = [\"${IMAGES}:/images\"]\n";
        std::fs::write(dir.path().join("roles.toml"), edf).unwrap();
        let images = dir.path().display().to_string();
        let edf_path = images.clone();
        let var = move |name: &str| match name {
            "EDF_PATH" => Some(edf_path.clone()),
            "IMAGES" => Some(images.clone()),
            _ => None,
        };
        let missing = check("roles", &var, &[]).unwrap_err().join("\n");
        assert!(missing.contains("roles.sqsh does not exist"), "{missing}");
        std::fs::write(&image, b"squashfs").unwrap();
        assert_eq!(check("roles", &var, &[]), Ok(()));
        let unknown = check("nope", &var, &[]).unwrap_err().join("\n");
        assert!(unknown.contains("no EDF named nope"), "{unknown}");
        let unset = check(
            "roles",
            &|name| (name == "EDF_PATH").then(|| dir.path().display().to_string()),
            &[],
        )
        .unwrap_err()
        .join("\n");
        assert!(unset.contains("${IMAGES} is not set"), "{unset}");
    }

    #[test]
    fn registry_images_are_left_to_the_engine() {
        assert!(!is_file_image("nvcr.io#nvidia/pytorch:24.01-py3"));
        assert!(is_file_image("/capstor/images/x.sqsh"));
    }
}
