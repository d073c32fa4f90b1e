//! JSON values between the core and Python: objects are dicts, arrays
//! lists, strings str, numbers int or float, `true`/`false`/`null`
//! `True`/`False`/`None`, as Python's `json` module reads them.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

/// The deepest value converted from Python: past it, a value nested in
/// itself would recurse for good.
const MAX_DEPTH: usize = 64;

/// A JSON value as a Python object.
pub(crate) fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => dict_of(py, map)?.into_any(),
    })
}

/// A JSON object as a Python dict, in its order.
pub(crate) fn dict_of<'py>(py: Python<'py>, map: &Map<String, Value>) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (key, value) in map {
        dict.set_item(key, to_py(py, value)?)?;
    }
    Ok(dict)
}

/// A Python value as JSON, `depth` levels down; `what` names it in the
/// error.
fn from_py_at(value: &Bound<'_, PyAny>, what: &str, depth: usize) -> PyResult<Value> {
    if depth > MAX_DEPTH {
        return Err(PyTypeError::new_err(format!(
            "{what} nests deeper than {MAX_DEPTH} levels"
        )));
    }
    if value.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(Value::String(s.to_cow()?.into_owned()));
    }
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if value.is_instance_of::<PyInt>() {
        if let Ok(i) = value.extract::<i64>() {
            return Ok(Value::Number(i.into()));
        }
        if let Ok(u) = value.extract::<u64>() {
            return Ok(Value::Number(u.into()));
        }
        return Err(PyTypeError::new_err(format!(
            "{what}: the integer {value} does not fit in 64 bits"
        )));
    }
    if let Ok(f) = value.cast::<PyFloat>() {
        let f = f.value();
        return Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| PyTypeError::new_err(format!("{what}: {f} is not a number JSON can carry")));
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        return Ok(Value::Object(map_from_py(dict, what, depth)?));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let mut items = Vec::new();
        for item in value.try_iter()? {
            items.push(from_py_at(&item?, what, depth + 1)?);
        }
        return Ok(Value::Array(items));
    }
    Err(PyTypeError::new_err(format!(
        "{what}: a {} is not a JSON value (give str, int, float, bool, None, list or dict)",
        value.get_type().name()?
    )))
}

/// A Python dict with string keys as a JSON object.
pub(crate) fn map_from_py(
    dict: &Bound<'_, PyDict>,
    what: &str,
    depth: usize,
) -> PyResult<Map<String, Value>> {
    let mut map = Map::new();
    for (key, value) in dict.iter() {
        let Ok(key) = key.cast::<PyString>() else {
            return Err(PyTypeError::new_err(format!(
                "{what}: the key {key} is not a string"
            )));
        };
        let key = key.to_cow()?.into_owned();
        let value = from_py_at(&value, &format!("{what}[{key:?}]"), depth + 1)?;
        map.insert(key, value);
    }
    Ok(map)
}
