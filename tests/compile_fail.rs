//! A wrong handler does not compile, and the error names what is wrong
//! with it: the content taken twice, a state the router is not given, an
//! argument that is no extractor, a result that is no answer.

#[test]
#[cfg(feature = "adapters")]
fn wrong_handlers_are_refused_naming_the_fault() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/compile_fail/*.rs");
}
