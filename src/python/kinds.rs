//! tree-sitter-python node kinds and field names used by payreview (grammar 0.25).

pub const MODULE: &str = "module";
pub const FUNCTION_DEFINITION: &str = "function_definition";
pub const CLASS_DEFINITION: &str = "class_definition";
pub const DECORATED_DEFINITION: &str = "decorated_definition";
pub const DECORATOR: &str = "decorator";
pub const CALL: &str = "call";
pub const ARGUMENT_LIST: &str = "argument_list";
pub const KEYWORD_ARGUMENT: &str = "keyword_argument";
pub const LIST_SPLAT: &str = "list_splat";
pub const DICTIONARY_SPLAT: &str = "dictionary_splat";
pub const DICTIONARY_SPLAT_PATTERN: &str = "dictionary_splat_pattern";
pub const LIST_SPLAT_PATTERN: &str = "list_splat_pattern";
pub const KEYWORD_SEPARATOR: &str = "keyword_separator";
pub const ATTRIBUTE: &str = "attribute";
pub const IDENTIFIER: &str = "identifier";
pub const STRING: &str = "string";
pub const INTEGER: &str = "integer";
pub const FLOAT: &str = "float";
pub const NONE: &str = "none";
pub const TRUE: &str = "true";
pub const FALSE: &str = "false";
pub const TUPLE: &str = "tuple";
pub const EXPRESSION_LIST: &str = "expression_list";
pub const PATTERN_LIST: &str = "pattern_list";
pub const TUPLE_PATTERN: &str = "tuple_pattern";
pub const LIST: &str = "list";
pub const SET: &str = "set";
pub const DICTIONARY: &str = "dictionary";
pub const PAIR: &str = "pair";
pub const PARENTHESIZED_EXPRESSION: &str = "parenthesized_expression";
pub const BINARY_OPERATOR: &str = "binary_operator";
pub const UNARY_OPERATOR: &str = "unary_operator";
pub const COMPARISON_OPERATOR: &str = "comparison_operator";
pub const BOOLEAN_OPERATOR: &str = "boolean_operator";
pub const NOT_OPERATOR: &str = "not_operator";
pub const CONDITIONAL_EXPRESSION: &str = "conditional_expression";
pub const SUBSCRIPT: &str = "subscript";
pub const AWAIT: &str = "await";
pub const LAMBDA: &str = "lambda";
pub const NAMED_EXPRESSION: &str = "named_expression";
pub const TRY_STATEMENT: &str = "try_statement";
pub const EXCEPT_CLAUSE: &str = "except_clause";
pub const EXCEPT_GROUP_CLAUSE: &str = "except_group_clause";
pub const ELSE_CLAUSE: &str = "else_clause";
pub const FINALLY_CLAUSE: &str = "finally_clause";
pub const FOR_STATEMENT: &str = "for_statement";
pub const WHILE_STATEMENT: &str = "while_statement";
pub const IF_STATEMENT: &str = "if_statement";
pub const ELIF_CLAUSE: &str = "elif_clause";
pub const WITH_STATEMENT: &str = "with_statement";
pub const RETURN_STATEMENT: &str = "return_statement";
pub const RAISE_STATEMENT: &str = "raise_statement";
pub const PASS_STATEMENT: &str = "pass_statement";
pub const BREAK_STATEMENT: &str = "break_statement";
pub const CONTINUE_STATEMENT: &str = "continue_statement";
pub const EXPRESSION_STATEMENT: &str = "expression_statement";
pub const ASSIGNMENT: &str = "assignment";
pub const AUGMENTED_ASSIGNMENT: &str = "augmented_assignment";
pub const IMPORT_STATEMENT: &str = "import_statement";
pub const IMPORT_FROM_STATEMENT: &str = "import_from_statement";
pub const ALIASED_IMPORT: &str = "aliased_import";
pub const DOTTED_NAME: &str = "dotted_name";
pub const BLOCK: &str = "block";
pub const COMMENT: &str = "comment";
pub const ERROR: &str = "ERROR";
pub const PARAMETERS: &str = "parameters";
pub const TYPED_PARAMETER: &str = "typed_parameter";
pub const DEFAULT_PARAMETER: &str = "default_parameter";
pub const TYPED_DEFAULT_PARAMETER: &str = "typed_default_parameter";
pub const AS_PATTERN: &str = "as_pattern";

/// Kinds that the shared walk files away for rules to look up (see `NodeIndex`).
pub const INDEXED: &[&str] = &[
    FUNCTION_DEFINITION,
    CLASS_DEFINITION,
    CALL,
    TRY_STATEMENT,
    EXCEPT_CLAUSE,
    FOR_STATEMENT,
    WHILE_STATEMENT,
    IF_STATEMENT,
    RETURN_STATEMENT,
    RAISE_STATEMENT,
    ASSIGNMENT,
    AUGMENTED_ASSIGNMENT,
    BINARY_OPERATOR,
    IMPORT_STATEMENT,
    IMPORT_FROM_STATEMENT,
    DECORATOR,
    DECORATED_DEFINITION,
    AWAIT,
    LAMBDA,
    ATTRIBUTE,
    COMPARISON_OPERATOR,
    WITH_STATEMENT,
    BREAK_STATEMENT,
    CONDITIONAL_EXPRESSION,
    BOOLEAN_OPERATOR,
    ERROR,
];
