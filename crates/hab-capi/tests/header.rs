//! `hab.h` against the library, so that the header cannot drift from what the library exports.
//!
//! The Rust side is read with `syn` from `src/`: every `#[no_mangle] extern "C"` function,
//! every `#[repr(C)]` struct and enum. From them this test writes a C file that includes
//! `hab.h` and, compiled by the system's C compiler with `-Werror`, checks:
//! - each function is declared by the header with the library's signature (a pointer to it
//!   initialised from the header's declaration: a missing declaration or another parameter or
//!   return type does not compile);
//! - each struct has the library's fields, in order, at the same offsets and with compatible
//!   types, and the same size (a struct whose Rust side ends in fields C cannot name, such as
//!   `hab_mutator`'s private state, is checked up to them: the header declares that prefix);
//! - each enum constant has the library's value, and the layout constants their values in the
//!   `hab` crate.
//!
//! The compiler's `-aux-info` then lists the header's own prototypes: every function it declares
//! (`static inline` ones apart) must be one the library exports.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use syn::{Fields, FnArg, Item, ReturnType, Type};

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// What the library exports to C, read from its source.
#[derive(Default)]
struct Abi {
    /// Exported functions: name, parameter types, return type.
    functions: Vec<(String, Vec<Type>, Option<Type>)>,
    /// `#[repr(C)]` structs: name and fields.
    structs: Vec<(String, Vec<(String, Type)>)>,
    /// `#[repr(C)]` enums: name and constants with their values.
    enums: Vec<(String, Vec<(String, i64)>)>,
    /// Type aliases, resolved where a type names one.
    aliases: BTreeMap<String, Type>,
}

fn has_attribute(attributes: &[syn::Attribute], name: &str, argument: Option<&str>) -> bool {
    attributes.iter().any(|attribute| {
        attribute.path().is_ident(name)
            && argument.is_none_or(|argument| {
                let mut found = false;
                let _ = attribute.parse_nested_meta(|meta| {
                    found |= meta.path.is_ident(argument);
                    Ok(())
                });
                found
            })
    })
}

fn read_abi(directory: &Path, abi: &mut Abi) {
    let mut entries: Vec<_> = std::fs::read_dir(directory)
        .expect("src/ is readable")
        .map(|entry| entry.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            read_abi(&path, abi);
            continue;
        }
        if path.extension().is_none_or(|extension| extension != "rs") {
            continue;
        }
        let source = std::fs::read_to_string(&path).unwrap();
        let file = syn::parse_file(&source).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for item in file.items {
            read_item(item, abi);
        }
    }
}

/// A field as C sees it: a field of type `LevelStats` (the `hab` crate's `#[repr(C)]`
/// figures, every one a `u64`) is its figures, flat, in their order; any other field is
/// itself.
fn flat_fields(name: String, ty: Type) -> Vec<(String, Type)> {
    let is_level_stats = matches!(&ty, Type::Path(path)
        if path.path.segments.last().is_some_and(|last| last.ident == "LevelStats"));
    if !is_level_stats {
        return vec![(name, ty)];
    }
    let figure: Type = syn::parse_quote!(u64);
    hab::LevelStats::NAMES
        .iter()
        .map(|figure_name| (figure_name.to_string(), figure.clone()))
        .collect()
}

fn read_item(item: Item, abi: &mut Abi) {
    match item {
        Item::Fn(function)
            if function.sig.abi.is_some() && has_attribute(&function.attrs, "no_mangle", None) =>
        {
            let parameters = function
                .sig
                .inputs
                .iter()
                .map(|input| match input {
                    FnArg::Typed(typed) => (*typed.ty).clone(),
                    FnArg::Receiver(_) => panic!("an exported function takes no self"),
                })
                .collect();
            let output = match function.sig.output {
                ReturnType::Default => None,
                ReturnType::Type(_, ty) => Some(*ty),
            };
            abi.functions
                .push((function.sig.ident.to_string(), parameters, output));
        }
        Item::Struct(structure) if has_attribute(&structure.attrs, "repr", Some("C")) => {
            let Fields::Named(fields) = structure.fields else {
                panic!("{}: a C struct has named fields", structure.ident);
            };
            let fields = fields
                .named
                .into_iter()
                .flat_map(|field| flat_fields(field.ident.unwrap().to_string(), field.ty))
                .collect();
            abi.structs.push((structure.ident.to_string(), fields));
        }
        Item::Enum(enumeration) if has_attribute(&enumeration.attrs, "repr", Some("C")) => {
            let constants = enumeration
                .variants
                .into_iter()
                .map(|variant| {
                    let Some((_, syn::Expr::Lit(literal))) = variant.discriminant else {
                        panic!("{}: a C enum states every value", variant.ident);
                    };
                    let syn::Lit::Int(value) = literal.lit else {
                        panic!("{}: an integer value", variant.ident);
                    };
                    (variant.ident.to_string(), value.base10_parse().unwrap())
                })
                .collect();
            abi.enums.push((enumeration.ident.to_string(), constants));
        }
        Item::Type(alias) => {
            abi.aliases.insert(alias.ident.to_string(), *alias.ty);
        }
        Item::Mod(module) => {
            for item in module.content.map(|(_, items)| items).unwrap_or_default() {
                read_item(item, abi);
            }
        }
        _ => {}
    }
}

/// Writes C type names for Rust types; function pointer types become typedefs.
struct Renderer<'a> {
    aliases: &'a BTreeMap<String, Type>,
    typedefs: String,
    count: usize,
}

impl Renderer<'_> {
    /// The C spelling of `ty`, or `None` when C cannot name it (a Rust-only type).
    fn render(&mut self, ty: &Type) -> Option<String> {
        match ty {
            Type::Ptr(pointer) => {
                let pointee = self.render(&pointer.elem)?;
                let constness = if pointer.const_token.is_some() {
                    " const"
                } else {
                    ""
                };
                Some(format!("{pointee}{constness} *"))
            }
            Type::BareFn(function) => {
                let parameters = function
                    .inputs
                    .iter()
                    .map(|input| self.render(&input.ty))
                    .collect::<Option<Vec<_>>>()?;
                let output = match &function.output {
                    ReturnType::Default => "void".to_string(),
                    ReturnType::Type(_, ty) => self.render(ty)?,
                };
                self.count += 1;
                let name = format!("hab_check_function_{}", self.count);
                let parameters = if parameters.is_empty() {
                    "void".to_string()
                } else {
                    parameters.join(", ")
                };
                writeln!(self.typedefs, "typedef {output} (*{name})({parameters});").unwrap();
                Some(name)
            }
            Type::Path(path) => {
                let last = path.path.segments.last()?;
                let name = last.ident.to_string();
                if name == "Option" {
                    // `Option<fn>`: a nullable function pointer, as C's.
                    let syn::PathArguments::AngleBracketed(arguments) = &last.arguments else {
                        return None;
                    };
                    let Some(syn::GenericArgument::Type(inner @ Type::BareFn(_))) =
                        arguments.args.first()
                    else {
                        return None;
                    };
                    return self.render(inner);
                }
                if let Some(aliased) = self.aliases.get(&name) {
                    let aliased = aliased.clone();
                    return self.render(&aliased);
                }
                let c = match name.as_str() {
                    "u8" => "uint8_t",
                    "u16" => "uint16_t",
                    "u32" => "uint32_t",
                    "u64" => "uint64_t",
                    "i8" => "int8_t",
                    "i16" => "int16_t",
                    "i32" => "int32_t",
                    "i64" => "int64_t",
                    "usize" => "size_t",
                    "isize" => "intptr_t",
                    "c_int" => "int",
                    "c_uint" => "unsigned int",
                    "c_char" => "char",
                    "c_void" => "void",
                    "bool" => "bool",
                    "f64" => "double",
                    name if name.starts_with("hab_") => name,
                    _ => return None,
                };
                Some(c.to_string())
            }
            Type::Tuple(tuple) if tuple.elems.is_empty() => Some("void".to_string()),
            _ => None,
        }
    }
}

/// The C file that checks the header against `abi`, and the names of the exported functions.
fn check_source(abi: &Abi) -> (String, BTreeSet<String>) {
    let mut renderer = Renderer {
        aliases: &abi.aliases,
        typedefs: String::new(),
        count: 0,
    };
    let mut checks = String::new();
    let mut exported = BTreeSet::new();
    for (name, parameters, output) in &abi.functions {
        let parameters = parameters
            .iter()
            .map(|ty| renderer.render(ty))
            .collect::<Option<Vec<_>>>()
            .unwrap_or_else(|| panic!("{name}: a parameter C cannot name"));
        let output = match output {
            None => "void".to_string(),
            Some(ty) => renderer
                .render(ty)
                .unwrap_or_else(|| panic!("{name}: a return type C cannot name")),
        };
        let parameters = if parameters.is_empty() {
            "void".to_string()
        } else {
            parameters.join(", ")
        };
        writeln!(
            checks,
            "{output} (*const hab_check_{name})({parameters}) = {name};"
        )
        .unwrap();
        exported.insert(name.clone());
    }
    for (name, fields) in &abi.structs {
        let mut shadow = String::new();
        let mut asserts = String::new();
        let mut complete = true;
        for (field, ty) in fields {
            let Some(c) = renderer.render(ty) else {
                complete = false; // the private rest: C declares the prefix
                break;
            };
            writeln!(shadow, "    {c} {field};").unwrap();
            writeln!(
                asserts,
                "_Static_assert(offsetof(struct hab_check_{name}, {field}) == \
                 offsetof({name}, {field}), \"{name}.{field}: offset\");\n\
                 _Static_assert(__builtin_types_compatible_p(__typeof__((({name} *)0)->{field}), \
                 {c}), \"{name}.{field}: type\");"
            )
            .unwrap();
        }
        writeln!(checks, "struct hab_check_{name} {{\n{shadow}}};\n{asserts}").unwrap();
        if complete {
            writeln!(
                checks,
                "_Static_assert(sizeof(struct hab_check_{name}) == sizeof({name}), \
                 \"{name}: size\");"
            )
            .unwrap();
        }
    }
    for (name, constants) in &abi.enums {
        writeln!(
            checks,
            "_Static_assert(sizeof({name}) == sizeof(int), \"{name}: size\");"
        )
        .unwrap();
        for (constant, value) in constants {
            writeln!(
                checks,
                "_Static_assert({constant} == {value}, \"{name}::{constant}\");"
            )
            .unwrap();
        }
    }
    for (name, value) in [
        ("HAB_TLAB_TOP_OFFSET", hab::TLAB_TOP_OFFSET as u64),
        ("HAB_TLAB_SOFT_END_OFFSET", hab::TLAB_SOFT_END_OFFSET as u64),
        (
            "HAB_SAFEPOINT_POLL_OFFSET",
            hab::SAFEPOINT_POLL_OFFSET as u64,
        ),
        ("HAB_CPU_LAB_SLOT_BYTES", hab::CPU_LAB_SLOT_BYTES as u64),
        (
            "HAB_CPU_LAB_SLOT_SHIFT",
            u64::from(hab::CPU_LAB_SLOT_BYTES.trailing_zeros()),
        ),
        (
            "HAB_CPU_BUFFER_TOP_BITS",
            u64::from(hab::CPU_BUFFER_TOP_BITS),
        ),
        ("HAB_CPU_LAB_TOP_OFFSET", hab::CPU_LAB_TOP_OFFSET as u64),
        ("HAB_CPU_LAB_END_OFFSET", hab::CPU_LAB_END_OFFSET as u64),
        ("HAB_RSEQ_SIGNATURE", u64::from(hab::RSEQ_SIGNATURE)),
        ("HAB_RSEQ_CS_OFFSET", hab::RSEQ_CS_OFFSET as u64),
        (
            "HAB_CPU_LAB_INACTIVE",
            u64::from(hab_capi::CPU_LAB_INACTIVE),
        ),
        ("HAB_ABI_VERSION", u64::from(hab_capi::HAB_ABI_VERSION)),
        ("HAB_FLIP_CYCLES_OVER_BOUND", hab::CYCLES_OVER_BOUND_TO_FLIP),
        (
            "HAB_RSEQ_UNAVAILABLE",
            hab_capi::HAB_RSEQ_UNAVAILABLE as u64,
        ),
        ("HAB_RSEQ_GLIBC", hab_capi::HAB_RSEQ_GLIBC as u64),
        ("HAB_RSEQ_OWN", hab_capi::HAB_RSEQ_OWN as u64),
        (
            "HAB_RSEQ_OWN_THREAD_LOCAL",
            hab_capi::HAB_RSEQ_OWN_THREAD_LOCAL as u64,
        ),
        (
            "HAB_RSEQ_UNREGISTERED",
            hab_capi::HAB_RSEQ_UNREGISTERED as u64,
        ),
    ] {
        writeln!(
            checks,
            "_Static_assert({name} == {value}u, \"{name} is {value} in the library\");"
        )
        .unwrap();
    }
    let source = format!(
        "#include <stdbool.h>\n#include <stddef.h>\n#include <stdint.h>\n#include \"hab.h\"\n\n\
         {}\n{checks}",
        renderer.typedefs
    );
    (source, exported)
}

fn out_dir() -> PathBuf {
    let directory = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("header-check");
    std::fs::create_dir_all(&directory).unwrap();
    directory
}

#[test]
fn the_header_declares_what_the_library_exports() {
    let mut abi = Abi::default();
    read_abi(&manifest().join("src"), &mut abi);
    assert!(
        abi.functions.len() > 30 && abi.structs.len() > 3 && !abi.enums.is_empty(),
        "the library's source was read ({} functions, {} structs, {} enums)",
        abi.functions.len(),
        abi.structs.len(),
        abi.enums.len()
    );
    let (source, exported) = check_source(&abi);
    let directory = out_dir();
    let file = directory.join("check.c");
    std::fs::write(&file, &source).unwrap();
    let prototypes = directory.join("prototypes.txt");
    let output = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"])
        .arg("-I")
        .arg(manifest().join("include"))
        .arg(format!("-aux-info={}", prototypes.display()))
        .arg(&file)
        .output()
        .expect("the C compiler runs");
    assert!(
        output.status.success(),
        "hab.h disagrees with the library (the checks are in {}):\n{}",
        file.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    // The header's own prototypes (from hab.h, not from the checks or system headers).
    let declared: BTreeSet<String> = std::fs::read_to_string(&prototypes)
        .unwrap()
        .lines()
        .filter(|line| line.contains("hab.h:") && !line.contains("static "))
        .filter_map(|line| {
            let declaration = line.split("*/").nth(1)?;
            let name = declaration.split('(').next()?.split_whitespace().last()?;
            Some(name.trim_start_matches('*').to_string())
        })
        .collect();
    let unexported: Vec<_> = declared.difference(&exported).collect();
    assert!(
        unexported.is_empty(),
        "hab.h declares functions the library does not export: {unexported:?}"
    );
    assert_eq!(
        declared.len(),
        exported.len(),
        "every exported function is declared once"
    );
}

#[test]
fn the_level_statistics_struct_lists_the_libraries_figures_in_their_order() {
    let mut abi = Abi::default();
    read_abi(&manifest().join("src"), &mut abi);
    let (_, fields) = abi
        .structs
        .iter()
        .find(|(name, _)| name == "hab_level_stats")
        .expect("the library defines hab_level_stats");
    let names: Vec<&str> = fields.iter().map(|(name, _)| name.as_str()).collect();
    // The C struct's offsets are checked against this Rust struct above, its `figures` field
    // read as `LevelStats`'s fields, flat: named and ordered as declared.
    assert_eq!(names[0], "level");
    assert_eq!(&names[1..], hab::LevelStats::NAMES);
}
