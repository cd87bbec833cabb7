//! The CEL environment of device selectors (upstream `k8s.io/dynamic-resource-allocation/cel`): an expression sees
//! `device.driver`, `device.attributes[domain][name]` (bool, int, string or semantic version) and
//! `device.capacity[domain][name]` (a quantity), where a name without a domain is the driver's. Expressions run on
//! the `cel` crate (cel-rust); the Kubernetes libraries device selectors use are registered here: quantities
//! (`quantity`, `isQuantity`, `compareTo`, `isGreaterThan`, `isLessThan`, `sign`, `isInteger`, `asInteger`,
//! `asApproximateFloat`) and semantic versions (`semver`, `isSemver`, `major`, `minor`, `patch` and the same
//! comparisons).
//!
//! Differences from upstream, on purpose or for want of a feature in the crate:
//! - Expressions are parsed, not type-checked, when compiled: a selector that is not a bool, or that calls a
//!   function the environment lacks, fails when it is first evaluated (upstream refuses it when compiling). Either
//!   way the claim cannot be allocated and the status names the selector.
//! - A domain absent from `device.attributes` or `device.capacity` is a missing key (upstream answers an empty
//!   map, so `has(device.attributes["x"].y)` is false there and an error here).
//! - Quantity arithmetic (`add`, `sub`) and the other Kubernetes libraries (lists, regex extensions, URLs, IPs)
//!   are not registered; the cost limit is not enforced.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, LazyLock, Mutex};

use cel::extractors::This;
use cel::objects::Opaque;
use cel::{Context, ExecutionError, FunctionContext, Program, Value};
use k8s_openapi::api::resource::v1::{DeviceAttribute, DeviceCapacity, ResourceSlice};
use rustc_hash::FxHashMap;

use crate::framework::quantity::Quantity;

/// A Kubernetes quantity as a CEL value; equal when the amounts are (`1Gi == 1024Mi`).
#[derive(Clone)]
struct CelQuantity(Quantity);

impl PartialEq for CelQuantity {
    fn eq(&self, other: &Self) -> bool {
        self.0.cmp(&other.0) == Ordering::Equal
    }
}
impl Eq for CelQuantity {}

impl fmt::Debug for CelQuantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "quantity({})", self.0)
    }
}

impl Opaque for CelQuantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

/// A semantic version as a CEL value; build metadata does not take part in comparisons.
#[derive(Clone)]
struct CelSemver(semver::Version);

impl PartialEq for CelSemver {
    fn eq(&self, other: &Self) -> bool {
        self.0.cmp_precedence(&other.0) == Ordering::Equal
    }
}
impl Eq for CelSemver {}

impl fmt::Debug for CelSemver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "semver({})", self.0)
    }
}

impl Opaque for CelSemver {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

fn quantity_value(q: Quantity) -> Value {
    Value::Opaque(Arc::new(CelQuantity(q)))
}

fn parse_semver(s: &str) -> Result<semver::Version, String> {
    semver::Version::parse(s).map_err(|e| e.to_string())
}

/// The two sides of a comparison, both quantities or both versions.
fn compare(ftx: &FunctionContext, a: &Arc<dyn Opaque>, b: &Arc<dyn Opaque>) -> Result<Ordering, ExecutionError> {
    if let (Some(a), Some(b)) = (a.downcast_ref::<CelQuantity>(), b.downcast_ref::<CelQuantity>()) {
        return Ok(a.0.cmp(&b.0));
    }
    if let (Some(a), Some(b)) = (a.downcast_ref::<CelSemver>(), b.downcast_ref::<CelSemver>()) {
        return Ok(a.0.cmp_precedence(&b.0));
    }
    Err(ftx.error(format!("no such overload: {} and {}", a.runtime_type_name(), b.runtime_type_name())))
}

fn this_quantity<'a>(ftx: &FunctionContext, v: &'a Arc<dyn Opaque>) -> Result<&'a Quantity, ExecutionError> {
    v.downcast_ref::<CelQuantity>().map(|q| &q.0).ok_or_else(|| ftx.error("no such overload"))
}

fn this_semver<'a>(ftx: &FunctionContext, v: &'a Arc<dyn Opaque>) -> Result<&'a semver::Version, ExecutionError> {
    v.downcast_ref::<CelSemver>().map(|s| &s.0).ok_or_else(|| ftx.error("no such overload"))
}

/// Adds one function to a context.
type Register = fn(&mut Context<'static, 'static>) -> Result<(), cel::DeclarationError>;

/// The root context: the functions of the Kubernetes libraries, no variables. Every evaluation binds `device` in a
/// child scope of it, so the functions are registered once per process.
static ROOT: LazyLock<Context<'static, 'static>> = LazyLock::new(|| {
    let mut ctx = Context::default();
    let functions: [(&str, Register); 14] = [
        ("quantity", |c| {
            c.add_function("quantity", |ftx: &FunctionContext, s: Arc<String>| -> Result<Value, ExecutionError> {
                Quantity::parse(&s).map(quantity_value).map_err(|_| {
                    ftx.error(
                        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                    )
                })
            })
        }),
        ("isQuantity", |c| c.add_function("isQuantity", |s: Arc<String>| Quantity::parse(&s).is_ok())),
        ("semver", |c| {
            c.add_function("semver", |ftx: &FunctionContext, s: Arc<String>| -> Result<Value, ExecutionError> {
                parse_semver(&s)
                    .map(|v| Value::Opaque(Arc::new(CelSemver(v))))
                    .map_err(|e| ftx.error(format!("could not parse {s:?} as semver: {e}")))
            })
        }),
        ("isSemver", |c| c.add_function("isSemver", |s: Arc<String>| parse_semver(&s).is_ok())),
        ("compareTo", |c| {
            c.add_function(
                "compareTo",
                |ftx: &FunctionContext,
                 This(a): This<Arc<dyn Opaque>>,
                 b: Arc<dyn Opaque>|
                 -> Result<i64, ExecutionError> { Ok(compare(ftx, &a, &b)? as i64) },
            )
        }),
        ("isGreaterThan", |c| {
            c.add_function(
                "isGreaterThan",
                |ftx: &FunctionContext,
                 This(a): This<Arc<dyn Opaque>>,
                 b: Arc<dyn Opaque>|
                 -> Result<bool, ExecutionError> { Ok(compare(ftx, &a, &b)? == Ordering::Greater) },
            )
        }),
        ("isLessThan", |c| {
            c.add_function(
                "isLessThan",
                |ftx: &FunctionContext,
                 This(a): This<Arc<dyn Opaque>>,
                 b: Arc<dyn Opaque>|
                 -> Result<bool, ExecutionError> { Ok(compare(ftx, &a, &b)? == Ordering::Less) },
            )
        }),
        ("sign", |c| {
            c.add_function(
                "sign",
                |ftx: &FunctionContext, This(a): This<Arc<dyn Opaque>>| -> Result<i64, ExecutionError> {
                    let q = this_quantity(ftx, &a)?;
                    let zero = Quantity::parse("0").expect("zero parses");
                    Ok(q.cmp(&zero) as i64)
                },
            )
        }),
        ("isInteger", |c| {
            c.add_function(
                "isInteger",
                |ftx: &FunctionContext, This(a): This<Arc<dyn Opaque>>| -> Result<bool, ExecutionError> {
                    let q = this_quantity(ftx, &a)?;
                    Ok(q.milli_value() % 1000 == 0 && q.value() != i64::MAX && q.value() != i64::MIN)
                },
            )
        }),
        ("asInteger", |c| {
            c.add_function(
                "asInteger",
                |ftx: &FunctionContext, This(a): This<Arc<dyn Opaque>>| -> Result<i64, ExecutionError> {
                    let q = this_quantity(ftx, &a)?;
                    let v = q.value();
                    if q.milli_value() % 1000 != 0 || v == i64::MAX || v == i64::MIN {
                        return Err(ftx.error("cannot convert value to integer"));
                    }
                    Ok(v)
                },
            )
        }),
        ("asApproximateFloat", |c| {
            c.add_function(
                "asApproximateFloat",
                |ftx: &FunctionContext, This(a): This<Arc<dyn Opaque>>| -> Result<f64, ExecutionError> {
                    let q = this_quantity(ftx, &a)?;
                    Ok(q.to_string().parse::<f64>().unwrap_or_else(|_| q.milli_value() as f64 / 1000.0))
                },
            )
        }),
        ("major", |c| {
            c.add_function(
                "major",
                |ftx: &FunctionContext, This(a): This<Arc<dyn Opaque>>| -> Result<i64, ExecutionError> {
                    Ok(this_semver(ftx, &a)?.major as i64)
                },
            )
        }),
        ("minor", |c| {
            c.add_function(
                "minor",
                |ftx: &FunctionContext, This(a): This<Arc<dyn Opaque>>| -> Result<i64, ExecutionError> {
                    Ok(this_semver(ftx, &a)?.minor as i64)
                },
            )
        }),
        ("patch", |c| {
            c.add_function(
                "patch",
                |ftx: &FunctionContext, This(a): This<Arc<dyn Opaque>>| -> Result<i64, ExecutionError> {
                    Ok(this_semver(ftx, &a)?.patch as i64)
                },
            )
        }),
    ];
    for (name, add) in functions {
        if let Err(e) = add(&mut ctx) {
            // A name the standard library already declares: the build of this table is wrong, not user input.
            panic!("registering CEL function {name}: {e:?}");
        }
    }
    ctx
});

/// A compiled selector, or why it did not compile.
pub type Compiled = Result<Arc<Program>, String>;

/// Compiled selectors by expression, shared by every cycle (upstream's `cel.Cache`): a class's selectors are
/// compiled once, not per pod and node. Also what each selector answered for each device of a ResourceSlice, by
/// the slice's UID and resourceVersion: an answer depends only on the expression and the device (its driver,
/// attributes, capacity and `allowMultipleAllocations`, all in the slice), and evaluating means building the
/// device's whole CEL value, while every cycle asks again for every device of every node it filters.
#[derive(Default)]
pub struct CelCache {
    programs: Mutex<HashMap<String, Compiled>>,
    answers: Mutex<FxHashMap<String, SliceAnswers>>,
}

/// One ResourceSlice's answers (device index → expression → answer), for one resourceVersion.
#[derive(Default)]
struct SliceAnswers {
    resource_version: String,
    devices: Vec<Vec<Answer>>,
}

/// An expression and what it answered for one device.
type Answer = (Arc<str>, Result<bool, String>);

/// Slices whose answers are kept at most: past it the answers start again (slices replaced or deleted leave
/// theirs behind until then).
const MAX_SLICES_ANSWERED: usize = 65_536;

impl fmt::Debug for CelCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CelCache").finish_non_exhaustive()
    }
}

impl CelCache {
    /// The program of an expression, compiled on first use.
    pub fn get_or_compile(&self, expression: &str) -> Compiled {
        let mut programs = self.programs.lock().expect("CEL cache lock");
        if let Some(p) = programs.get(expression) {
            return p.clone();
        }
        let compiled = compile(expression);
        programs.insert(expression.to_string(), compiled.clone());
        compiled
    }

    /// [`device_matches`] for device `index` of `slice`, answered from what was kept when the slice (its UID and
    /// resourceVersion; a slice without both is evaluated every time) was asked before.
    pub fn device_matches(
        &self,
        expression: &str,
        program: &Program,
        slice: &ResourceSlice,
        index: usize,
        device: &DeviceView<'_>,
    ) -> Result<bool, String> {
        let meta = &slice.metadata;
        let Some((uid, version)) = meta.uid.as_deref().zip(meta.resource_version.as_deref()) else {
            return device_matches(program, device);
        };
        let kept = |answers: &FxHashMap<String, SliceAnswers>| {
            let s = answers.get(uid).filter(|s| s.resource_version == version)?;
            let (_, answer) = s.devices.get(index)?.iter().find(|(e, _)| **e == *expression)?;
            Some(answer.clone())
        };
        if let Some(answer) = kept(&self.answers.lock().expect("CEL answers lock")) {
            return answer;
        }
        let answer = device_matches(program, device);
        let mut answers = self.answers.lock().expect("CEL answers lock");
        if answers.len() >= MAX_SLICES_ANSWERED && !answers.contains_key(uid) {
            answers.clear();
        }
        let s = answers.entry(uid.to_string()).or_default();
        if s.resource_version != version {
            *s = SliceAnswers { resource_version: version.to_string(), devices: Vec::new() };
        }
        if s.devices.len() <= index {
            s.devices.resize_with(index + 1, Vec::new);
        }
        if !s.devices[index].iter().any(|(e, _)| **e == *expression) {
            s.devices[index].push((Arc::from(expression), answer.clone()));
        }
        answer
    }
}

/// Parses an expression (upstream's message starts "compilation failed: " too).
pub fn compile(expression: &str) -> Compiled {
    // The parser reports some malformed input by panicking; such input must not take the scheduler down.
    match std::panic::catch_unwind(|| Program::compile(expression)) {
        Ok(Ok(p)) => Ok(Arc::new(p)),
        Ok(Err(e)) => Err(format!("compilation failed: {e}")),
        Err(_) => Err("compilation failed: the expression could not be parsed".to_string()),
    }
}

/// The parts of a device a selector sees.
#[derive(Debug, Clone, Copy)]
pub struct DeviceView<'a> {
    /// The driver's name (also the domain of unqualified attribute and capacity names).
    pub driver: &'a str,
    /// The device's attributes by (qualified or not) name.
    pub attributes: Option<&'a BTreeMap<String, DeviceAttribute>>,
    /// The device's capacities by (qualified or not) name.
    pub capacity: Option<&'a BTreeMap<String, DeviceCapacity>>,
    /// `allowMultipleAllocations` (DRAConsumableCapacity, beta and on since v1.36): false when unset.
    pub allow_multiple_allocations: bool,
}

/// `domain/name` split; a name without a domain is the driver's (upstream `parseQualifiedName`).
fn qualified<'a>(name: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    name.split_once('/').unwrap_or((driver, name))
}

fn attribute_value(a: &DeviceAttribute) -> Result<Value, String> {
    if let Some(b) = a.bool {
        Ok(Value::Bool(b))
    } else if let Some(i) = a.int {
        Ok(Value::Int(i))
    } else if let Some(s) = &a.string {
        Ok(Value::String(Arc::new(s.clone())))
    } else if let Some(v) = &a.version {
        let v = parse_semver(v).map_err(|e| format!("parse semantic version: {e}"))?;
        Ok(Value::Opaque(Arc::new(CelSemver(v))))
    } else {
        Err("unsupported attribute value".to_string())
    }
}

/// The `device` variable.
fn device_value(d: &DeviceView<'_>) -> Result<Value, String> {
    let mut attributes: HashMap<String, HashMap<String, Value>> = HashMap::new();
    for (name, a) in d.attributes.into_iter().flatten() {
        let value = attribute_value(a).map_err(|e| format!("attribute {name}: {e}"))?;
        let (domain, id) = qualified(name, d.driver);
        attributes.entry(domain.to_string()).or_default().insert(id.to_string(), value);
    }
    let mut capacity: HashMap<String, HashMap<String, Value>> = HashMap::new();
    for (name, c) in d.capacity.into_iter().flatten() {
        let q = Quantity::parse(&c.value.0).map_err(|e| format!("capacity {name}: {e}"))?;
        let (domain, id) = qualified(name, d.driver);
        capacity.entry(domain.to_string()).or_default().insert(id.to_string(), quantity_value(q));
    }
    let mut device: HashMap<String, Value> = HashMap::new();
    device.insert("driver".into(), Value::String(Arc::new(d.driver.to_string())));
    device.insert("allowMultipleAllocations".into(), Value::Bool(d.allow_multiple_allocations));
    device.insert("attributes".into(), Value::from(attributes));
    device.insert("capacity".into(), Value::from(capacity));
    Ok(Value::from(device))
}

/// Evaluates a selector on a device (upstream `DeviceMatches`): its bool result, or the runtime error.
pub fn device_matches(program: &Program, device: &DeviceView<'_>) -> Result<bool, String> {
    let value = device_value(device)?;
    let mut ctx = ROOT.new_inner_scope();
    ctx.add_variable_from_value("device", value);
    match program.execute(&ctx) {
        Ok(Value::Bool(b)) => Ok(b),
        Ok(other) => Err(format!("CEL result of type {} could not be converted to bool", other.type_of())),
        Err(e) => Err(runtime_error(&e)),
    }
}

/// An evaluation error in cel-go's words where the two name the same thing (`no such key: x`).
fn runtime_error(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        e => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn device() -> (BTreeMap<String, DeviceAttribute>, BTreeMap<String, DeviceCapacity>) {
        let attributes = serde_json::from_value(json!({
            "model": {"string": "a100"},
            "cores": {"int": 108},
            "healthy": {"bool": true},
            "driverVersion": {"version": "1.2.3"},
            "other.example.com/numa": {"int": 1},
        }))
        .unwrap();
        let capacity = serde_json::from_value(json!({"memory": {"value": "40Gi"}})).unwrap();
        (attributes, capacity)
    }

    fn eval(expr: &str) -> Result<bool, String> {
        let (a, c) = device();
        let program = compile(expr)?;
        device_matches(
            &program,
            &DeviceView {
                driver: "gpu.example.com",
                attributes: Some(&a),
                capacity: Some(&c),
                allow_multiple_allocations: false,
            },
        )
    }

    #[test]
    fn selectors_see_the_device_as_upstream_does() {
        let cases: &[(&str, Result<bool, &str>)] = &[
            (r#"device.driver == "gpu.example.com""#, Ok(true)),
            // v1.37's device type has the field (DRAConsumableCapacity); unset reads false.
            ("!device.allowMultipleAllocations", Ok(true)),
            (r#"device.attributes["gpu.example.com"].model == "a100""#, Ok(true)),
            (r#"device.attributes["gpu.example.com"].cores >= 100"#, Ok(true)),
            (r#"device.attributes["gpu.example.com"].healthy"#, Ok(true)),
            (r#"device.attributes["other.example.com"].numa == 1"#, Ok(true)),
            (r#""model" in device.attributes["gpu.example.com"]"#, Ok(true)),
            (r#"has(device.attributes["gpu.example.com"].missing)"#, Ok(false)),
            (r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0"#, Ok(true)),
            (r#"device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("32Gi"))"#, Ok(true)),
            (r#"device.capacity["gpu.example.com"].memory.isLessThan(quantity("32Gi"))"#, Ok(false)),
            (r#"device.capacity["gpu.example.com"].memory == quantity("40960Mi")"#, Ok(true)),
            (r#"device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.2.0"))"#, Ok(true)),
            (r#"device.attributes["gpu.example.com"].driverVersion.major() == 1"#, Ok(true)),
            (r#"device.attributes["gpu.example.com"].driverVersion == semver("1.2.3")"#, Ok(true)),
            (r#"isQuantity("1Gi") && !isQuantity("x")"#, Ok(true)),
            (r#"device.attributes["gpu.example.com"].nope == 1"#, Err("no such key: nope")),
            (r#"device.driver"#, Err("CEL result of type string could not be converted to bool")),
            (r#"device.driver =="#, Err("compilation failed")),
        ];
        for (expr, want) in cases {
            let got = eval(expr);
            match want {
                Ok(b) => assert_eq!(got, Ok(*b), "{expr}"),
                Err(e) => assert!(got.as_ref().is_err_and(|g| g.starts_with(e)), "{expr}: {got:?}"),
            }
        }
    }

    /// Kept answers are per slice version, device and expression: a slice whose device changed (a new
    /// resourceVersion) is asked again, another device or expression is never answered with this one's, and a
    /// runtime error is kept as the error.
    #[test]
    fn kept_answers_follow_the_slice_version_device_and_expression() {
        let slice = |version: &str, model: &str| -> ResourceSlice {
            serde_json::from_value(json!({
                "metadata": {"name": "s", "uid": "u1", "resourceVersion": version},
                "spec": {"driver": "gpu.example.com", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                    "nodeName": "n1", "devices": [
                        {"name": "d0", "attributes": {"model": {"string": model}}},
                        {"name": "d1", "attributes": {"model": {"string": "h100"}}}]}
            }))
            .unwrap()
        };
        let cache = CelCache::default();
        let ask = |s: &ResourceSlice, index: usize, expr: &str| {
            let d = &s.spec.devices.as_ref().unwrap()[index];
            let view = DeviceView {
                driver: &s.spec.driver,
                attributes: d.attributes.as_ref(),
                capacity: d.capacity.as_ref(),
                allow_multiple_allocations: false,
            };
            let program = cache.get_or_compile(expr).unwrap();
            cache.device_matches(expr, &program, s, index, &view)
        };
        let a100 = r#"device.attributes["gpu.example.com"].model == "a100""#;
        let h100 = r#"device.attributes["gpu.example.com"].model == "h100""#;
        let missing = r#"device.attributes["gpu.example.com"].nope == 1"#;
        let v1 = slice("1", "a100");
        assert_eq!(ask(&v1, 0, a100), Ok(true));
        assert_eq!(ask(&v1, 0, a100), Ok(true), "kept");
        assert_eq!(ask(&v1, 1, a100), Ok(false), "another device");
        assert_eq!(ask(&v1, 0, h100), Ok(false), "another expression");
        assert_eq!(ask(&v1, 0, missing), Err("no such key: nope".to_string()));
        assert_eq!(ask(&v1, 0, missing), Err("no such key: nope".to_string()), "an error is kept as the error");
        let v2 = slice("2", "h100");
        assert_eq!(ask(&v2, 0, a100), Ok(false), "a new version of the slice is asked again");
        assert_eq!(ask(&v2, 0, h100), Ok(true));
    }
}
