-- The `sqlite` preset's initial database (shop.db in each session's folder): a small shop with
-- customers, products and their orders, so that reading tools have rows to return and a join
-- has something to join.
CREATE TABLE customers (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    city TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE
);
INSERT INTO customers (id, name, city, email) VALUES
    (1, 'Ada Lovelace', 'London', 'ada@example.com'),
    (2, 'Alan Turing', 'Manchester', 'alan@example.com'),
    (3, 'Grace Hopper', 'New York', 'grace@example.com'),
    (4, 'Katherine Johnson', 'Hampton', 'katherine@example.com');

CREATE TABLE products (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    price REAL NOT NULL CHECK (price >= 0),
    stock INTEGER NOT NULL CHECK (stock >= 0)
);
INSERT INTO products (id, name, price, stock) VALUES
    (1, 'Notebook', 4.5, 120),
    (2, 'Fountain pen', 32.0, 15),
    (3, 'Desk lamp', 27.9, 8),
    (4, 'Slide rule', 18.25, 0);

CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers (id),
    product_id INTEGER NOT NULL REFERENCES products (id),
    quantity INTEGER NOT NULL CHECK (quantity > 0),
    ordered_on TEXT NOT NULL
);
INSERT INTO orders (id, customer_id, product_id, quantity, ordered_on) VALUES
    (1, 1, 1, 3, '2024-01-15'),
    (2, 1, 2, 1, '2024-02-02'),
    (3, 2, 4, 2, '2024-02-20'),
    (4, 3, 3, 1, '2024-03-05'),
    (5, 4, 1, 10, '2024-03-18');
